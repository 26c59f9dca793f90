//! Fixes a Go `wasip1` reactor up before it becomes a component.
//!
//! Two things of Go's runtime meet two things of the component model here:
//!
//! - The preview 1 adapter allocates its state on its first WASI call, which Go's
//!   runtime makes while it initializes, before any Go function (`cabi_realloc`
//!   included) may run; and Go's heap takes all of linear memory above its data,
//!   so the adapter may not `memory.grow` a page of its own either. The module gets
//!   a `cabi_realloc_adapter` written in wasm, a bump allocator over an array the
//!   SDK reserves in Go's data (`adapterArena` in `sdk-go/internal/wit/abi.go`),
//!   which wit-component gives the adapter.
//! - Berth freezes a plugin's monotonic clock at 0 unless its configuration grants
//!   the clock, and Go's runtime refuses to start when `nanotime` reads 0. Calls to
//!   `clock_time_get` go through a shim that reads a frozen clock as 1 ns instead.

use anyhow::{Context, Result, bail};
use wasm_encoder::reencode::Reencode;
use wasm_encoder::{
    CodeSection, ConstExpr, ExportKind, ExportSection, Function, FunctionSection, GlobalSection,
    GlobalType, Instruction as I, MemArg, Module, RawSection, TypeSection, ValType,
};
use wasmparser::{Parser, Payload, TypeRef};

/// The first bytes of the SDK's adapter arena; the arena follows them.
const ARENA_MARKER: &[u8] = b"berth:adapter-arena:v1";
/// The arena's size, as declared in abi.go.
const ARENA_SIZE: u32 = 256 << 10;

struct Redirect {
    from: u32,
    to: u32,
}

impl Reencode for Redirect {
    type Error = std::convert::Infallible;

    fn function_index(
        &mut self,
        func: u32,
    ) -> Result<u32, wasm_encoder::reencode::Error<Self::Error>> {
        Ok(if func == self.from { self.to } else { func })
    }
}

/// Returns the module with the adapter's allocator and the clock shim.
pub fn prepare(core: &[u8]) -> Result<Vec<u8>> {
    // First pass: where things are.
    let mut func_imports = 0u32;
    let mut defined = 0u32;
    let mut globals = 0u32;
    let mut types = 0u32;
    let mut clock: Option<(u32, u32)> = None;
    let mut arena: Option<u32> = None;
    for payload in Parser::new(0).parse_all(core) {
        match payload? {
            Payload::TypeSection(s) => types = s.count(),
            Payload::ImportSection(s) => {
                for imp in s.into_imports() {
                    let imp = imp?;
                    if let TypeRef::Func(t) = imp.ty {
                        if imp.module == "wasi_snapshot_preview1" && imp.name == "clock_time_get" {
                            clock = Some((func_imports, t));
                        }
                        func_imports += 1;
                    }
                }
            }
            Payload::FunctionSection(s) => defined = s.count(),
            Payload::GlobalSection(s) => globals = s.count(),
            Payload::DataSection(s) => {
                for d in s {
                    let d = d?;
                    let wasmparser::DataKind::Active { offset_expr, .. } = d.kind else {
                        continue;
                    };
                    let mut ops = offset_expr.get_operators_reader();
                    let wasmparser::Operator::I32Const { value } = ops.read()? else {
                        continue;
                    };
                    if let Some(at) = d
                        .data
                        .windows(ARENA_MARKER.len())
                        .position(|w| w == ARENA_MARKER)
                    {
                        arena = Some(value as u32 + at as u32);
                    }
                }
            }
            _ => {}
        }
    }
    let (clock_idx, clock_ty) = clock.context("the module imports no clock_time_get")?;
    let base =
        arena.context("the module has no adapter arena (is it built with the Berth Go SDK?)")?;
    let shim = func_imports + defined;
    let realloc = shim + 1;
    let realloc_ty = types;
    let next = globals;

    let mut re = Redirect {
        from: clock_idx,
        to: shim,
    };
    let mut module = Module::new();
    let mut saw = (false, false, false, false);
    let mut code: Option<(CodeSection, u32)> = None;
    for payload in Parser::new(0).parse_all(core) {
        let payload = payload?;
        match payload {
            Payload::Version { .. } | Payload::End(_) => {}
            Payload::TypeSection(s) => {
                let mut out = TypeSection::new();
                re.parse_type_section(&mut out, s)?;
                out.ty().function(
                    [ValType::I32, ValType::I32, ValType::I32, ValType::I32],
                    [ValType::I32],
                );
                module.section(&out);
                saw.0 = true;
            }
            Payload::FunctionSection(s) => {
                let mut out = FunctionSection::new();
                re.parse_function_section(&mut out, s)?;
                out.function(clock_ty);
                out.function(realloc_ty);
                module.section(&out);
                saw.1 = true;
            }
            Payload::GlobalSection(s) => {
                let mut out = GlobalSection::new();
                re.parse_global_section(&mut out, s)?;
                out.global(
                    GlobalType {
                        val_type: ValType::I32,
                        mutable: true,
                        shared: false,
                    },
                    &ConstExpr::i32_const(base as i32),
                );
                module.section(&out);
                saw.2 = true;
            }
            Payload::ExportSection(s) => {
                let mut out = ExportSection::new();
                re.parse_export_section(&mut out, s)?;
                out.export("cabi_realloc_adapter", ExportKind::Func, realloc);
                module.section(&out);
                saw.3 = true;
            }
            Payload::ElementSection(s) => {
                let mut out = wasm_encoder::ElementSection::new();
                re.parse_element_section(&mut out, s)?;
                module.section(&out);
            }
            Payload::StartSection { func, .. } => {
                module.section(&wasm_encoder::StartSection {
                    function_index: re.function_index(func)?,
                });
            }
            Payload::CodeSectionStart { count, .. } => {
                code = Some((CodeSection::new(), count));
                if count == 0 {
                    bail!("the module defines no function");
                }
            }
            Payload::CodeSectionEntry(body) => {
                let (out, left) = code
                    .as_mut()
                    .context("a function body outside the code section")?;
                re.parse_function_body(out, body)?;
                *left -= 1;
                if *left == 0 {
                    // The code section, re-encoded with the calls redirected, and the
                    // two new functions.
                    out.function(&clock_shim(clock_idx));
                    out.function(&bump_realloc(next, base + ARENA_SIZE));
                    module.section(&*out);
                }
            }
            Payload::CustomSection(c) => {
                module.section(&wasm_encoder::CustomSection {
                    name: c.name().into(),
                    data: c.data().into(),
                });
            }
            other => {
                if let Some((id, range)) = other.as_section() {
                    let range = range.start as usize..range.end as usize;
                    module.section(&RawSection {
                        id,
                        data: &core[range],
                    });
                }
            }
        }
    }
    if saw != (true, true, true, true) {
        bail!("the module lacks a type, function, global or export section");
    }
    Ok(module.finish())
}

/// `clock_time_get(id, precision, out)`: the import's answer, with a monotonic
/// reading of 0 turned into 1.
fn clock_shim(import: u32) -> Function {
    let mut f = Function::new([(1, ValType::I32)]);
    let mem = MemArg {
        offset: 0,
        align: 3,
        memory_index: 0,
    };
    f.instructions()
        .local_get(0)
        .local_get(1)
        .local_get(2)
        .call(import)
        .local_set(3)
        // A monotonic clock (id 1) that read 0 reads 1 ns.
        .local_get(3)
        .i32_eqz()
        .local_get(0)
        .i32_const(1)
        .i32_eq()
        .i32_and()
        .if_(wasm_encoder::BlockType::Empty)
        .local_get(2)
        .i64_load(mem)
        .i64_eqz()
        .if_(wasm_encoder::BlockType::Empty)
        .local_get(2)
        .i64_const(1)
        .i64_store(mem)
        .end()
        .end()
        .local_get(3)
        .end();
    f
}

/// `cabi_realloc_adapter(old, old_size, align, new_size)`: bumps global `next`
/// up to `end`; traps when the arena is full (the adapter allocates once).
fn bump_realloc(next: u32, end: u32) -> Function {
    let mut f = Function::new([(1, ValType::I32)]);
    let ins = [
        // p = (next + align - 1) & -align
        I::GlobalGet(next),
        I::LocalGet(2),
        I::I32Add,
        I::I32Const(1),
        I::I32Sub,
        I::I32Const(0),
        I::LocalGet(2),
        I::I32Sub,
        I::I32And,
        I::LocalTee(4),
        I::LocalGet(3),
        I::I32Add,
        I::GlobalSet(next),
        I::GlobalGet(next),
        I::I32Const(end as i32),
        I::I32GtU,
        I::If(wasm_encoder::BlockType::Empty),
        I::Unreachable,
        I::End,
        I::LocalGet(4),
        I::End,
    ];
    for i in &ins {
        f.instruction(i);
    }
    f
}
