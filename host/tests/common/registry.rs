//! A real OCI registry on loopback for the tests of modules from registries: Debian's
//! `docker-registry` (the CNCF distribution registry; `tests/e2e/registry.sh
//! install` installs it), on a free port, storing in a directory of its own, with
//! htpasswd (bcrypt) authentication.
#![allow(dead_code, reason = "each test binary uses a part of the helpers")]

use crate::common::free_port;
use base64::Engine as _;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where Debian's package puts the registry.
pub const REGISTRY_BIN: &str = "/usr/bin/docker-registry";

/// The user and password the registry knows.
pub const USER: &str = "berth";
/// The user's password.
pub const PASSWORD: &str = "plugin-pusher-2";

/// An HTTP answer: status, headers (names lowercased), body.
pub type Response = (u16, Vec<(String, String)>, Vec<u8>);

/// A registry process, stopped on drop.
pub struct Registry {
    /// `127.0.0.1:PORT`.
    pub host: String,
    dir: PathBuf,
    child: Option<Child>,
}

impl Registry {
    /// Starts a registry storing under `dir` (its config, htpasswd, storage and log
    /// go there), with one user, [`USER`]:[`PASSWORD`]; returns once it answers.
    pub fn start(dir: &Path) -> Registry {
        assert!(
            Path::new(REGISTRY_BIN).exists(),
            "{REGISTRY_BIN} is missing: run `tests/e2e/registry.sh install` (as root; .ci/run does)"
        );
        std::fs::create_dir_all(dir).unwrap();
        let hash = bcrypt::hash(PASSWORD, 4).unwrap();
        std::fs::write(dir.join("htpasswd"), format!("{USER}:{hash}\n")).unwrap();
        let port = free_port();
        let host = format!("127.0.0.1:{port}");
        let config = format!(
            "version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {host}\n  secret: berth-test-secret\nauth:\n  htpasswd:\n    realm: berth-test\n    path: {}\n",
            dir.join("storage").display(),
            dir.join("htpasswd").display(),
        );
        std::fs::write(dir.join("config.yml"), config).unwrap();
        let mut r = Registry {
            host,
            dir: dir.to_owned(),
            child: None,
        };
        r.spawn();
        r
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("registry.log"))
            .unwrap();
        let child = Command::new(REGISTRY_BIN)
            .arg("serve")
            .arg(self.dir.join("config.yml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("start {REGISTRY_BIN}: {e}"));
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok((status, _, _)) = self.get("/v2/", None, &[]) {
                // The API root asks for credentials: it is up, with auth on.
                assert_eq!(status, 401, "GET /v2/ without credentials");
                return;
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                panic!("{REGISTRY_BIN} exited ({status}): {}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "the registry did not answer within 30 s: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops it (its storage stays).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again on the same port, with the same storage.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    /// Its log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("registry.log")).unwrap_or_default()
    }

    /// A docker config file with `user`:`password` for this registry, in the
    /// registry's directory; returns its path.
    pub fn docker_config(&self, name: &str, user: &str, password: &str) -> PathBuf {
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        let path = self.dir.join(name);
        std::fs::write(
            &path,
            format!(r#"{{"auths": {{"{}": {{"auth": "{auth}"}}}}}}"#, self.host),
        )
        .unwrap();
        path
    }

    /// `berth plugin push MODULE oci://HOST/REPOSITORY:TAG --plain-http` with
    /// `docker_config` (and a component cache of its own under the registry's
    /// directory); the digest it printed, its only line on stdout.
    pub fn push(&self, module: &str, repository_tag: &str, docker_config: &Path) -> String {
        let target = format!("oci://{}/{repository_tag}", self.host);
        let out = Command::new(env!("CARGO_BIN_EXE_berth"))
            .args([
                "plugin",
                "push",
                module,
                &target,
                "--plain-http",
                "--docker-config",
            ])
            .arg(docker_config)
            .env("BERTH_CACHE_DIR", self.dir.join("push-cache"))
            .env_remove("DOCKER_CONFIG")
            .output()
            .expect("run berth plugin push");
        let printed = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "berth plugin push {module} {target} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let digest = printed.trim().to_owned();
        assert_eq!(printed, format!("{digest}\n"), "one line, the digest");
        digest
    }

    /// A plain HTTP/1.1 GET of `path` with the test user's credentials when `auth`,
    /// and `headers`: (status, headers, body). Independent of Berth's client.
    pub fn get(
        &self,
        path: &str,
        auth: Option<(&str, &str)>,
        headers: &[(&str, &str)],
    ) -> std::io::Result<Response> {
        let mut s = std::net::TcpStream::connect(&self.host)?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        let mut req = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n",
            self.host
        );
        if let Some((u, p)) = auth {
            let token = base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"));
            req.push_str(&format!("Authorization: Basic {token}\r\n"));
        }
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        s.write_all(req.as_bytes())?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw)?;
        let end = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .ok_or_else(|| std::io::Error::other("no end of headers"))?;
        let head = String::from_utf8_lossy(&raw[..end]).into_owned();
        let mut lines = head.lines();
        let status: u16 = lines
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| std::io::Error::other("no status line"))?;
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let mut body = raw[end + 4..].to_vec();
        if headers
            .iter()
            .any(|(k, v)| k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"))
        {
            body = dechunk(&body);
        }
        Ok((status, headers, body))
    }

    /// The manifest a tag or digest names, as the registry serves it, with the
    /// registry's `Docker-Content-Digest`.
    pub fn manifest(&self, repository: &str, reference: &str) -> (Vec<u8>, String) {
        let (status, headers, body) = self
            .get(
                &format!("/v2/{repository}/manifests/{reference}"),
                Some((USER, PASSWORD)),
                &[("Accept", "application/vnd.oci.image.manifest.v1+json")],
            )
            .unwrap();
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        let digest = headers
            .iter()
            .find(|(k, _)| k == "docker-content-digest")
            .map(|(_, v)| v.clone())
            .expect("a Docker-Content-Digest header");
        (body, digest)
    }
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(eol) = b.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size = usize::from_str_radix(
            String::from_utf8_lossy(&b[..eol])
                .split(';')
                .next()
                .unwrap()
                .trim(),
            16,
        )
        .unwrap_or(0);
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&b[eol + 2..eol + 2 + size]);
        b = &b[eol + 2 + size + 2..];
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}
