//! Command samples: a `console` block of a Markdown file, marked by an HTML comment
//! just before it, whose commands are run and whose output is compared with what
//! the block shows.
//!
//! ````markdown
//! <!-- sample mask="[0-9.]+ s \([0-9]+ pods/s\)" -->
//! ```console
//! $ berth simulate examples/timeline.yaml
//! default/big    big    2 attempts
//! default/gated  small  1 attempt
//! 2 scheduled, 0 unschedulable, 2 pods in 0.005 s (406 pods/s)
//! ```
//! ````
//!
//! - Every `console` block carries a mark: `<!-- sample -->` (run it), or
//!   `<!-- sample skip="why" -->` (it needs what the test cannot have: a cluster, a
//!   registry, a toolchain).
//! - A line that begins `$ ` is a command (a line ending in `\` goes on with the
//!   next); the lines after it, up to the next command, are what it prints. A line
//!   that is only `...` stands for any number of lines.
//! - `mask="REGEX"` (repeatable): every match, in what the block shows and in what
//!   the command printed, counts as equal: timings, sizes, digests.
//! - `stream="stdout"` (the default), `"stderr"` or `"both"` (stderr into stdout, in
//!   the order they were written): what is compared.
//! - `exit="N"`: the exit status every command of the block ends with (default 0).
//! - `cwd="DIR"`: where the commands run, relative to the repository (default its
//!   root); `cwd="tmp"`: a new empty directory.
//! - Commands run with `sh -c`, the `berth` cargo built first on `PATH`; a command
//!   that begins `cargo run --release --` runs that `berth` instead (the README's
//!   set-up command, without building anything again).

use pulldown_cmark::{CodeBlockKind, Event, Parser, Tag, TagEnd};
use regex::Regex;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A marked `console` block.
#[derive(Debug)]
pub struct Sample {
    /// The Markdown file.
    pub file: PathBuf,
    /// The line its block begins on.
    pub line: usize,
    /// Why it is not run, when it is not.
    pub skip: Option<String>,
    /// Where its commands run (`tmp`: a new directory), relative to the repository.
    pub cwd: Option<String>,
    /// What is compared: `stdout`, `stderr` or `both`.
    pub stream: String,
    /// The exit status of every command.
    pub exit: i32,
    /// What counts as equal wherever it matches.
    pub masks: Vec<Regex>,
    /// Its commands, each with what it prints.
    pub steps: Vec<Step>,
}

/// One command of a sample and the lines it prints.
#[derive(Debug)]
pub struct Step {
    /// The command as the reader types it.
    pub command: String,
    /// What it prints.
    pub expected: Vec<String>,
}

impl Sample {
    /// Where it is, as `file:line`, relative to `repo`.
    pub fn place(&self, repo: &Path) -> String {
        let file = self.file.strip_prefix(repo).unwrap_or(&self.file);
        format!("{}:{}", file.display(), self.line)
    }
}

/// The samples of the Markdown file `file`, or what is wrong with their marks: a
/// `console` block without one, a mark without a block, an option it does not know.
pub fn samples(file: &Path) -> Result<Vec<Sample>, Vec<String>> {
    let text = std::fs::read_to_string(file).expect("read a Markdown file");
    let line_of = |offset: usize| text[..offset].matches('\n').count() + 1;
    let name = file.display();
    let mut found = Vec::new();
    let mut errors = Vec::new();
    let mut mark: Option<(String, usize)> = None;
    let mut block: Option<(usize, String)> = None;
    for (event, range) in Parser::new(&text).into_offset_iter() {
        match event {
            Event::Html(html) | Event::InlineHtml(html) => {
                let html = html.trim();
                if let Some(body) = html
                    .strip_prefix("<!-- sample")
                    .and_then(|b| b.strip_suffix("-->"))
                {
                    if let Some((_, at)) = &mark {
                        errors.push(format!(
                            "{name}:{at}: a sample mark with no console block after it"
                        ));
                    }
                    mark = Some((body.to_owned(), line_of(range.start)));
                }
            }
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                let lang = info.split([',', ' ']).next().unwrap_or_default();
                if lang == "console" {
                    block = Some((line_of(range.start), String::new()));
                } else if let Some((_, at)) = mark.take() {
                    errors.push(format!(
                        "{name}:{at}: a sample mark before a {lang:?} block, not a console block"
                    ));
                }
            }
            Event::Text(t) => {
                if let Some((_, body)) = block.as_mut() {
                    body.push_str(&t);
                }
            }
            Event::End(TagEnd::CodeBlock) => {
                let Some((line, body)) = block.take() else {
                    continue;
                };
                let Some((options, _)) = mark.take() else {
                    errors.push(format!(
                        "{name}:{line}: a console block without a mark: <!-- sample --> to run it, <!-- sample skip=\"why\" --> if it cannot be"
                    ));
                    continue;
                };
                match sample(file, line, &options, &body) {
                    Ok(s) => found.push(s),
                    Err(e) => errors.push(format!("{name}:{line}: {e}")),
                }
            }
            Event::Start(Tag::Paragraph | Tag::Heading { .. } | Tag::Table(_) | Tag::List(_)) => {
                if let Some((_, at)) = mark.take() {
                    errors.push(format!(
                        "{name}:{at}: a sample mark with no console block right after it"
                    ));
                }
            }
            _ => {}
        }
    }
    if let Some((_, at)) = mark {
        errors.push(format!(
            "{name}:{at}: a sample mark with no console block after it"
        ));
    }
    if errors.is_empty() {
        Ok(found)
    } else {
        Err(errors)
    }
}

/// One sample from its mark's options and its block's text.
fn sample(file: &Path, line: usize, options: &str, body: &str) -> Result<Sample, String> {
    let mut s = Sample {
        file: file.to_path_buf(),
        line,
        skip: None,
        cwd: None,
        stream: "stdout".into(),
        exit: 0,
        masks: Vec::new(),
        steps: Vec::new(),
    };
    for (key, value) in parse_options(options)? {
        match key.as_str() {
            "skip" => s.skip = Some(value),
            "cwd" => s.cwd = Some(value),
            "stream" if ["stdout", "stderr", "both"].contains(&value.as_str()) => s.stream = value,
            "exit" => {
                s.exit = value
                    .parse()
                    .map_err(|_| format!("exit={value:?}: not a number"))?
            }
            "mask" => s
                .masks
                .push(Regex::new(&value).map_err(|e| format!("mask={value:?}: {e}"))?),
            _ => return Err(format!("unknown sample option {key}={value:?}")),
        }
    }
    let mut lines = body.lines();
    while let Some(l) = lines.next() {
        if let Some(command) = l.strip_prefix("$ ") {
            let mut command = command.to_owned();
            while command.ends_with('\\') {
                command.pop();
                command.push('\n');
                command.push_str(lines.next().unwrap_or_default());
            }
            s.steps.push(Step {
                command,
                expected: Vec::new(),
            });
        } else if let Some(step) = s.steps.last_mut() {
            step.expected.push(l.trim_end().to_owned());
        } else if !l.trim().is_empty() {
            return Err(format!(
                "{l:?} comes before the block's first command (`$ ...`)"
            ));
        }
    }
    for step in &mut s.steps {
        while step.expected.last().is_some_and(String::is_empty) {
            step.expected.pop();
        }
    }
    if s.steps.is_empty() {
        return Err("a console block with no command (`$ ...`)".into());
    }
    Ok(s)
}

/// `key="value" key="value" ...`; a bare word is a key with an empty value.
fn parse_options(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let key_end = rest.find(['=', ' ']).unwrap_or(rest.len());
        let key = rest[..key_end].to_owned();
        rest = &rest[key_end..];
        if let Some(r) = rest.strip_prefix("=\"") {
            let end = r
                .find('"')
                .ok_or_else(|| format!("{key}: a value without its closing quote"))?;
            out.push((key, r[..end].to_owned()));
            rest = r[end + 1..].trim_start();
        } else {
            out.push((key, String::new()));
            rest = rest.trim_start();
        }
    }
    Ok(out)
}

/// Runs samples.
#[derive(Debug)]
pub struct Runner {
    /// The `berth` binary.
    pub berth: PathBuf,
    /// The repository's root.
    pub repo: PathBuf,
    /// Variables every command gets (a component cache, ...).
    pub env: Vec<(String, String)>,
    /// The longest a command may run.
    pub timeout: Duration,
}

impl Runner {
    /// Runs every command of `sample` and compares what it prints; the error says
    /// where and what differed.
    pub fn run(&self, sample: &Sample) -> Result<(), String> {
        let place = sample.place(&self.repo);
        let tmp;
        let cwd = match sample.cwd.as_deref() {
            Some("tmp") => {
                tmp = tempfile::tempdir().expect("a temporary directory");
                tmp.path().to_path_buf()
            }
            Some(dir) => self.repo.join(dir),
            None => self.repo.clone(),
        };
        let bin_dir = self.berth.parent().expect("the binary's directory");
        let path = std::env::var_os("PATH").unwrap_or_default();
        let path = std::env::join_paths(
            std::iter::once(bin_dir.to_path_buf()).chain(std::env::split_paths(&path)),
        )
        .expect("a PATH");
        for step in &sample.steps {
            let command = match step.command.strip_prefix("cargo run --release -- ") {
                Some(args) => format!("berth {args}"),
                None => step.command.clone(),
            };
            let script = if sample.stream == "both" {
                format!("exec 2>&1\n{command}")
            } else {
                command
            };
            let (status, stdout, stderr) = self
                .output(&cwd, &path, &script)
                .map_err(|e| format!("{place}: `{}`: {e}", step.command))?;
            let printed = if sample.stream == "stderr" {
                &stderr
            } else {
                &stdout
            };
            let actual: Vec<String> = printed.lines().map(|l| l.trim_end().to_owned()).collect();
            let mut actual = actual;
            while actual.last().is_some_and(String::is_empty) {
                actual.pop();
            }
            let masked = |lines: &[String]| -> Vec<String> {
                lines
                    .iter()
                    .map(|l| {
                        sample
                            .masks
                            .iter()
                            .fold(l.clone(), |l, m| m.replace_all(&l, "[masked]").into_owned())
                    })
                    .collect()
            };
            let matched = lines_match(&masked(&step.expected), &masked(&actual));
            if status != Some(sample.exit) || !matched {
                let exit = match status {
                    Some(s) if s == sample.exit => String::new(),
                    Some(s) => format!(" exited with {s}, not {},", sample.exit),
                    None => " was killed by a signal,".into(),
                };
                let stderr = if sample.stream == "stderr" {
                    String::new()
                } else {
                    format!("\n--- its stderr:\n{stderr}")
                };
                return Err(format!(
                    "{place}: `{}`{exit} printed on {}:\n{}\n--- where the sample shows:\n{}{stderr}",
                    step.command,
                    sample.stream,
                    actual.join("\n"),
                    step.expected.join("\n"),
                ));
            }
        }
        Ok(())
    }

    /// Runs `script` with `sh -c`; its status and what it printed.
    fn output(
        &self,
        cwd: &Path,
        path: &std::ffi::OsStr,
        script: &str,
    ) -> Result<(Option<i32>, String, String), String> {
        let out_file = tempfile::tempfile().expect("a temporary file");
        let err_file = tempfile::tempfile().expect("a temporary file");
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .current_dir(cwd)
            .env("PATH", path)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(out_file.try_clone().expect("the file again"))
            .stderr(err_file.try_clone().expect("the file again"))
            .spawn()
            .map_err(|e| format!("cannot run sh: {e}"))?;
        let start = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for the command") {
                break status;
            }
            if start.elapsed() > self.timeout {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("still running after {:?}; killed", self.timeout));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let read = |mut f: std::fs::File| {
            use std::io::{Read, Seek};
            let mut s = Vec::new();
            f.rewind().expect("rewind");
            f.read_to_end(&mut s)
                .expect("read what the command printed");
            String::from_utf8_lossy(&s).into_owned()
        };
        Ok((status.code(), read(out_file), read(err_file)))
    }
}

/// Whether `actual` is what `expected` shows, a line `...` standing for any lines.
fn lines_match(expected: &[String], actual: &[String]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((first, rest)) if first == "..." => {
            (0..=actual.len()).any(|skip| lines_match(rest, &actual[skip..]))
        }
        Some((first, rest)) => actual
            .split_first()
            .is_some_and(|(a, actual_rest)| a == first && lines_match(rest, actual_rest)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_owned).collect()
    }

    #[test]
    fn an_ellipsis_stands_for_any_lines() {
        assert!(lines_match(&lines("a\n...\nd"), &lines("a\nb\nc\nd")));
        assert!(lines_match(&lines("a\n...\nd"), &lines("a\nd")));
        assert!(!lines_match(&lines("a\n...\nd"), &lines("a\nb")));
        assert!(lines_match(&lines("..."), &[]));
        assert!(!lines_match(&lines("a"), &lines("a\nb")));
    }

    #[test]
    fn options_are_read() {
        let o = parse_options(r#" mask="[0-9]+ s" exit="1" stream="both" "#).unwrap();
        assert_eq!(
            o,
            [
                ("mask".to_owned(), "[0-9]+ s".to_owned()),
                ("exit".to_owned(), "1".to_owned()),
                ("stream".to_owned(), "both".to_owned())
            ]
        );
        assert!(parse_options(r#"mask="open"#).is_err());
    }

    #[test]
    fn marks_and_blocks_are_paired() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.md");
        std::fs::write(
            &file,
            "# A\n\n<!-- sample mask=\"[0-9]+\" -->\n```console\n$ echo 1 \\\n  2\n1 2\n\n$ true\n```\n\n<!-- sample skip=\"a cluster\" -->\n```console\n$ kubectl get pods\n```\n",
        )
        .unwrap();
        let found = samples(&file).unwrap();
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].line, 4);
        assert_eq!(found[0].steps[0].command, "echo 1 \n  2");
        assert_eq!(found[0].steps[0].expected, ["1 2"]);
        assert!(found[0].steps[1].expected.is_empty());
        assert_eq!(found[1].skip.as_deref(), Some("a cluster"));

        std::fs::write(
            &file,
            "```console\n$ true\n```\n\n<!-- sample -->\n\ntext\n",
        )
        .unwrap();
        let errors = samples(&file).unwrap_err();
        assert_eq!(errors.len(), 2, "{errors:?}");
    }

    #[test]
    fn a_sample_runs_and_compares() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.md");
        std::fs::write(
            &file,
            "<!-- sample mask=\"took [0-9]+\" -->\n```console\n$ echo one; echo took 5; echo two >&2\none\ntook 12\n```\n\n<!-- sample stream=\"both\" exit=\"3\" -->\n```console\n$ echo out; echo err >&2; exit 3\nout\nerr\n```\n\n<!-- sample -->\n```console\n$ echo other\nsame\n```\n",
        )
        .unwrap();
        let found = samples(&file).unwrap();
        let runner = Runner {
            berth: PathBuf::from("/bin/true"),
            repo: dir.path().to_path_buf(),
            env: Vec::new(),
            timeout: Duration::from_secs(20),
        };
        runner.run(&found[0]).unwrap();
        runner.run(&found[1]).unwrap();
        let e = runner.run(&found[2]).unwrap_err();
        assert!(
            e.contains("a.md:16") && e.contains("other") && e.contains("same"),
            "{e}"
        );
    }
}
