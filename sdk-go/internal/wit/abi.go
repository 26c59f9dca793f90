// Package wit holds the canonical-ABI bindings of Berth's WIT package: the
// hand-written helpers in this file, and zz_bindings.go, which berth-go-bindgen
// generates from wit/ at build time (sdk-go/build.sh puts it in place with
// `go build -overlay`; it is never checked in).
package wit

import "unsafe"

// adapterArena is where the WASI preview 1 adapter keeps its state: it
// allocates while Go's runtime initializes, when no Go function can run yet, and
// Go's heap owns all memory above Go's data. berth-go-bindgen finds the array by
// its first bytes and gives the adapter a bump allocator over it.
var adapterArena = [256 << 10]byte{'b', 'e', 'r', 't', 'h', ':', 'a', 'd', 'a', 'p', 't', 'e', 'r', '-', 'a', 'r', 'e', 'n', 'a', ':', 'v', '1', 0}

// arenaRef keeps the linker from dropping the arena, which no Go code uses.
var arenaRef *[256 << 10]byte

func init() { arenaRef = &adapterArena }

// pinned keeps alive the buffers handed to the host: the arguments the host
// wrote through cabi_realloc until the export has read them, and an export's
// results until the next call (the host has read them by then).
var pinned [][]uint64

// cabiAlloc returns size bytes at the given alignment (at most 8), kept alive
// until unpin. Go's collector does not move objects, so the address stays valid.
func cabiAlloc(size, align uint32) uint32 {
	if size == 0 {
		return align
	}
	buf := make([]uint64, (size+7)/8)
	pinned = append(pinned, buf)
	return uint32(uintptr(unsafe.Pointer(&buf[0])))
}

// The host writes an export's arguments, and an import's results, through
// cabi_realloc, where it refuses any call out of the instance: a Go allocation
// that starts a collection (which reads the clock through WASI) would trap there.
// So cabi_realloc hands out memory from pool, allocated beforehand and grown
// between calls to twice the most a call has taken (at least minPool); only a call
// larger than that falls back to the Go allocator.
var (
	pool     []uint64
	poolUsed uint32
	poolPeak uint32
)

const minPool = 4 << 20

func init() { pool = make([]uint64, minPool/8) }

func poolAlloc(size, align uint32) uint32 {
	if size == 0 {
		return align
	}
	base := uint32(uintptr(unsafe.Pointer(&pool[0])))
	start := (base + poolUsed + align - 1) &^ (align - 1)
	if start+size > base+uint32(len(pool))*8 {
		poolUsed += size // counted, so that the pool grows for the next call
		return cabiAlloc(size, align)
	}
	poolUsed = start + size - base
	return start
}

//go:wasmexport cabi_realloc
func cabiRealloc(old, oldSize, align, newSize uint32) uint32 {
	p := poolAlloc(newSize, align)
	if old != 0 && oldSize != 0 {
		n := min(oldSize, newSize)
		copy(bytesAt(p, n), bytesAt(old, n))
	}
	return p
}

// unpin lets the collector have every buffer given out so far, and readies the
// pool for the next call (an export calls it once its arguments are Go values).
func unpin() {
	clear(pinned)
	pinned = pinned[:0]
	poolPeak = max(poolPeak, poolUsed)
	if want := max(minPool, 2*poolPeak); uint32(len(pool))*8 < want {
		pool = make([]uint64, want/8)
	}
	poolUsed = 0
}

func addr(p uint32) unsafe.Pointer {
	return unsafe.Pointer(uintptr(p))
}

func bytesAt(p, n uint32) []byte { return unsafe.Slice((*byte)(addr(p)), n) }

func ld8(p uint32) uint8   { return *(*uint8)(addr(p)) }
func ld16(p uint32) uint16 { return *(*uint16)(addr(p)) }
func ld32(p uint32) uint32 { return *(*uint32)(addr(p)) }
func ld64(p uint32) uint64 { return *(*uint64)(addr(p)) }

func st8(p uint32, v uint8)   { *(*uint8)(addr(p)) = v }
func st16(p uint32, v uint16) { *(*uint16)(addr(p)) = v }
func st32(p uint32, v uint32) { *(*uint32)(addr(p)) = v }
func st64(p uint32, v uint64) { *(*uint64)(addr(p)) = v }

func b2u8(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// liftString copies a string out of linear memory.
func liftString(p, n uint32) string {
	if n == 0 {
		return ""
	}
	return string(bytesAt(p, n))
}

// liftBytes copies a list<u8> out of linear memory.
func liftBytes(p, n uint32) []byte {
	v := make([]byte, n)
	if n > 0 {
		copy(v, bytesAt(p, n))
	}
	return v
}

// lowerString copies s into pinned memory: (ptr, len).
func lowerString(s string) (uint32, uint32) {
	if len(s) == 0 {
		return 1, 0
	}
	p := cabiAlloc(uint32(len(s)), 1)
	copy(bytesAt(p, uint32(len(s))), s)
	return p, uint32(len(s))
}

func lowerBytes(b []byte) (uint32, uint32) {
	if len(b) == 0 {
		return 1, 0
	}
	p := cabiAlloc(uint32(len(b)), 1)
	copy(bytesAt(p, uint32(len(b))), b)
	return p, uint32(len(b))
}

func lowerStringAt(at uint32, s string) {
	p, n := lowerString(s)
	st32(at, p)
	st32(at+4, n)
}

// Result is WIT's result<T, E>: Ok when !IsErr, else Err.
type Result[T, E any] struct {
	IsErr bool
	Ok    T
	Err   E
}

// Tuple2 is WIT's tuple<A, B>.
type Tuple2[A, B any] struct {
	F0 A
	F1 B
}

// Tuple3 is WIT's tuple<A, B, C>.
type Tuple3[A, B, C any] struct {
	F0 A
	F1 B
	F2 C
}
