//! Guest output: stdout, stderr and the SDK's `log` calls of one plugin instance go to
//! `tracing` (target `berth::plugin`), tagged with the plugin's name, one event per
//! line, under one token bucket per instance. Writes always succeed and never wait: a
//! plugin that prints megabytes loses lines (counted, and reported as "N lines
//! suppressed"), never its call.

use crate::metrics::Metrics;
use prometheus::IntCounter;
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Instant;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// Lines an instance may log at once after a quiet spell.
pub const BURST_LINES: u32 = 100;
/// Lines per second an instance may log in the long run.
pub const LINES_PER_SECOND: u32 = 10;
/// A longer line is cut here (the rest, up to the newline, is dropped).
pub const MAX_LINE_BYTES: usize = 4096;
/// How many bytes a guest may hand over in one write; any write is accepted.
const WRITE_PERMIT: usize = 64 * 1024;
/// Lines of stderr kept for the message of a call that traps.
const TAIL_LINES: usize = 3;
const TAIL_LINE_CHARS: usize = 512;

/// Which stream a line came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stream {
    Stdout,
    Stderr,
}

/// The level of an SDK `log` call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

/// One instance's output sink; clones share it (stdout, stderr and the store's
/// `log` import all write here).
#[derive(Clone)]
pub(crate) struct GuestOutput {
    shared: Arc<Shared>,
}

/// Every call begins and ends here, so the per-call bookkeeping is two atomic
/// operations; the lock is taken only when the guest writes.
struct Shared {
    /// The number of the call under way.
    call: AtomicU64,
    /// Lines were suppressed and not reported yet.
    suppressing: AtomicBool,
    state: Mutex<OutputState>,
}

struct OutputState {
    plugin: String,
    bucket: TokenBucket,
    /// Lines dropped since the last "suppressed" report.
    suppressed: u64,
    /// The unfinished line of stdout and of stderr.
    partial: [LineBuffer; 2],
    /// The last lines of stderr of call `tail_call`.
    tail: VecDeque<String>,
    tail_call: u64,
    counters: Option<(IntCounter, IntCounter)>,
}

#[derive(Default)]
struct LineBuffer {
    bytes: Vec<u8>,
    truncated: bool,
}

impl LineBuffer {
    fn push(&mut self, bytes: &[u8]) {
        let room = MAX_LINE_BYTES.saturating_sub(self.bytes.len());
        if bytes.len() > room {
            self.truncated = true;
        }
        self.bytes
            .extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    /// The finished line, and the buffer emptied for the next.
    fn take(&mut self) -> String {
        let mut line = String::from_utf8_lossy(&self.bytes).into_owned();
        if line.ends_with('\r') {
            line.pop();
        }
        if self.truncated {
            line.push_str(" [line truncated]");
        }
        self.bytes.clear();
        self.truncated = false;
        line
    }

    fn is_empty(&self) -> bool {
        self.bytes.is_empty() && !self.truncated
    }
}

/// A token bucket: `burst` lines at once, `rate` per second after that.
struct TokenBucket {
    tokens: f64,
    burst: f64,
    rate: f64,
    last: Instant,
}

impl TokenBucket {
    fn new(burst: u32, rate: u32) -> Self {
        TokenBucket {
            tokens: f64::from(burst),
            burst: f64::from(burst),
            rate: f64::from(rate),
            last: Instant::now(),
        }
    }

    fn take(&mut self) -> bool {
        let now = Instant::now();
        let refill = now.duration_since(self.last).as_secs_f64() * self.rate;
        self.tokens = (self.tokens + refill).min(self.burst);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

fn lock(shared: &Shared) -> MutexGuard<'_, OutputState> {
    let mut s = shared.state.lock().unwrap_or_else(|e| e.into_inner());
    // Stderr kept from an earlier call is not this call's.
    let call = shared.call.load(Ordering::Relaxed);
    if s.tail_call != call {
        s.tail.clear();
        s.tail_call = call;
    }
    s
}

impl GuestOutput {
    /// A sink for an instance of `plugin`, counting lines in `metrics`.
    pub(crate) fn new(plugin: &str, metrics: Option<&Metrics>) -> Self {
        GuestOutput {
            shared: Arc::new(Shared {
                call: AtomicU64::new(0),
                suppressing: AtomicBool::new(false),
                state: Mutex::new(OutputState {
                    plugin: plugin.to_owned(),
                    bucket: TokenBucket::new(BURST_LINES, LINES_PER_SECOND),
                    suppressed: 0,
                    partial: Default::default(),
                    tail: VecDeque::new(),
                    tail_call: 0,
                    counters: metrics.map(|m| m.output_line_counters(plugin)),
                }),
            }),
        }
    }

    /// The WASI stdout or stderr of the instance.
    pub(crate) fn stdio(&self, stream: Stream) -> GuestStdio {
        GuestStdio {
            out: self.clone(),
            stream,
        }
    }

    /// Takes bytes the guest wrote; every finished line is logged (or suppressed).
    pub(crate) fn write(&self, stream: Stream, mut bytes: &[u8]) {
        let mut s = lock(&self.shared);
        let k = stream as usize;
        while let Some(nl) = bytes.iter().position(|b| *b == b'\n') {
            s.partial[k].push(&bytes[..nl]);
            let line = s.partial[k].take();
            s.line(stream, &line);
            bytes = &bytes[nl + 1..];
        }
        s.partial[k].push(bytes);
        self.note_suppressed(&s);
    }

    fn note_suppressed(&self, s: &OutputState) {
        if s.suppressed > 0 {
            self.shared.suppressing.store(true, Ordering::Relaxed);
        }
    }

    /// An SDK `log` call.
    pub(crate) fn log(&self, level: Level, message: &str) {
        let mut buf = LineBuffer::default();
        buf.push(message.as_bytes());
        let line = buf.take();
        let mut s = lock(&self.shared);
        s.emit(level, "log", &line);
        self.note_suppressed(&s);
    }

    /// A call begins: the stderr kept for its trap message starts empty.
    pub(crate) fn begin_call(&self) {
        self.shared.call.fetch_add(1, Ordering::Relaxed);
    }

    /// A call ended: lines suppressed meanwhile are reported if the bucket allows a
    /// line again.
    pub(crate) fn end_call(&self) {
        if !self.shared.suppressing.load(Ordering::Relaxed) {
            return;
        }
        let mut s = lock(&self.shared);
        if s.suppressed > 0 && s.bucket.take() {
            s.report_suppressed();
        }
        if s.suppressed == 0 {
            self.shared.suppressing.store(false, Ordering::Relaxed);
        }
    }

    /// What the guest wrote to stderr in the current call, last lines (and the
    /// unfinished one) only: the guest's own words for a trap, such as its panic
    /// message.
    pub(crate) fn stderr_tail(&self) -> Vec<String> {
        let s = lock(&self.shared);
        let mut out: Vec<String> = s.tail.iter().cloned().collect();
        let partial = &s.partial[Stream::Stderr as usize];
        if !partial.is_empty() {
            out.push(cut(&String::from_utf8_lossy(&partial.bytes)));
        }
        if out.len() > TAIL_LINES {
            out.drain(..out.len() - TAIL_LINES);
        }
        out
    }
}

fn cut(line: &str) -> String {
    match line.char_indices().nth(TAIL_LINE_CHARS) {
        Some((i, _)) => format!("{}...", &line[..i]),
        None => line.to_owned(),
    }
}

impl OutputState {
    fn line(&mut self, stream: Stream, line: &str) {
        match stream {
            Stream::Stdout => self.emit(Level::Info, "stdout", line),
            Stream::Stderr => {
                if !line.trim().is_empty() {
                    self.tail.push_back(cut(line));
                    if self.tail.len() > TAIL_LINES {
                        self.tail.pop_front();
                    }
                }
                self.emit(Level::Warn, "stderr", line)
            }
        }
    }

    fn emit(&mut self, level: Level, stream: &'static str, line: &str) {
        if !self.bucket.take() {
            self.suppressed += 1;
            if let Some((_, suppressed)) = &self.counters {
                suppressed.inc();
            }
            return;
        }
        if self.suppressed > 0 {
            self.report_suppressed();
        }
        if let Some((logged, _)) = &self.counters {
            logged.inc();
        }
        let plugin = self.plugin.as_str();
        match level {
            Level::Trace => tracing::trace!(target: "berth::plugin", plugin, stream, "{line}"),
            Level::Debug => tracing::debug!(target: "berth::plugin", plugin, stream, "{line}"),
            Level::Info => tracing::info!(target: "berth::plugin", plugin, stream, "{line}"),
            Level::Warn => tracing::warn!(target: "berth::plugin", plugin, stream, "{line}"),
            Level::Error => tracing::error!(target: "berth::plugin", plugin, stream, "{line}"),
        }
    }

    fn report_suppressed(&mut self) {
        let n = std::mem::take(&mut self.suppressed);
        tracing::warn!(
            target: "berth::plugin",
            plugin = self.plugin.as_str(),
            "{n} lines of output suppressed (more than {BURST_LINES} at once or {LINES_PER_SECOND} per second)"
        );
    }
}

impl Drop for OutputState {
    fn drop(&mut self) {
        for stream in [Stream::Stdout, Stream::Stderr] {
            if !self.partial[stream as usize].is_empty() {
                let line = self.partial[stream as usize].take();
                self.line(stream, &line);
            }
        }
        if self.suppressed > 0 {
            self.report_suppressed();
        }
    }
}

/// The guest's stdout or stderr: a WASI output stream that takes every write at once.
#[derive(Clone)]
pub(crate) struct GuestStdio {
    out: GuestOutput,
    stream: Stream,
}

impl IsTerminal for GuestStdio {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestStdio {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for GuestStdio {
    async fn ready(&mut self) {}
}

impl OutputStream for GuestStdio {
    fn write(&mut self, bytes: bytes::Bytes) -> StreamResult<()> {
        self.out.write(self.stream, &bytes);
        Ok(())
    }
    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }
    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(WRITE_PERMIT)
    }
}

impl tokio::io::AsyncWrite for GuestStdio {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.out.write(self.stream, buf);
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(m: &Metrics, plugin: &str) -> (u64, u64) {
        let (logged, suppressed) = m.output_line_counters(plugin);
        (logged.get(), suppressed.get())
    }

    #[test]
    fn a_flood_is_cut_to_the_burst_and_counted() {
        let m = Metrics::new();
        let out = GuestOutput::new("Flood", Some(&m));
        let mut text = String::new();
        for i in 0..10_000 {
            text.push_str(&format!("line {i}\n"));
        }
        // Written in odd pieces: lines span writes.
        for chunk in text.as_bytes().chunks(7) {
            out.write(Stream::Stdout, chunk);
        }
        let (logged, suppressed) = counts(&m, "Flood");
        assert_eq!(logged + suppressed, 10_000);
        // The bucket refills at LINES_PER_SECOND: however slow this machine, writing
        // the lines above takes far less than the 990 seconds it would take to let
        // them all through.
        assert!(logged >= u64::from(BURST_LINES), "{logged}");
        assert!(suppressed > 9_000 - u64::from(BURST_LINES), "{suppressed}");
    }

    #[test]
    fn long_lines_are_cut_and_the_tail_keeps_the_last_stderr_lines() {
        let out = GuestOutput::new("P", None);
        out.begin_call();
        out.write(Stream::Stderr, &vec![b'x'; 3 * MAX_LINE_BYTES]);
        out.write(Stream::Stderr, b"\none\ntwo\nthree\npanicked at");
        let tail = out.stderr_tail();
        assert_eq!(tail, ["two", "three", "panicked at"]);
        out.begin_call();
        // A new call forgets the finished lines; the unfinished one is still pending.
        assert_eq!(out.stderr_tail(), ["panicked at"]);

        let mut b = LineBuffer::default();
        b.push(&vec![b'y'; MAX_LINE_BYTES + 10]);
        let line = b.take();
        assert!(line.ends_with(" [line truncated]"));
        assert_eq!(line.len(), MAX_LINE_BYTES + " [line truncated]".len());
    }
}
