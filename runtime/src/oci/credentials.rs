//! Registry credentials from a docker config file (`config.json`, or the
//! `.dockerconfigjson` key of a Kubernetes `kubernetes.io/dockerconfigjson` Secret
//! mounted as a file): `{"auths": {"REGISTRY": {"auth": base64("user:password")}}}`,
//! or `username` and `password` instead of `auth`.

use base64::Engine as _;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A user and password for one registry.
#[derive(Clone, PartialEq, Eq)]
pub struct Login {
    /// The user name.
    pub username: String,
    /// The password (or token).
    pub password: String,
}

impl std::fmt::Debug for Login {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Login")
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// The logins of a docker config file, by registry (`HOST` or `HOST:PORT`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Credentials {
    /// The file they were read from.
    pub file: Option<PathBuf>,
    logins: BTreeMap<String, Login>,
}

#[derive(serde::Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, AuthEntry>,
}

#[derive(serde::Deserialize)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
}

/// The registry a key of `auths` names: docker writes `https://HOST/v1/` for Docker
/// Hub and `HOST[:PORT]` (sometimes with a scheme) for the others.
fn registry_of_key(key: &str) -> String {
    let k = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    let host = k.split('/').next().unwrap_or(k);
    match host {
        "index.docker.io" | "registry-1.docker.io" => "docker.io".to_owned(),
        h => h.to_owned(),
    }
}

impl Credentials {
    /// Reads a docker config file; the error names the file and what is wrong.
    pub fn load(file: &Path) -> Result<Self, String> {
        let shown = file.display();
        let text =
            std::fs::read_to_string(file).map_err(|e| format!("{shown}: cannot read: {e}"))?;
        Self::parse(&text)
            .map(|logins| Credentials {
                file: Some(file.to_owned()),
                logins,
            })
            .map_err(|why| format!("{shown}: {why}"))
    }

    fn parse(text: &str) -> Result<BTreeMap<String, Login>, String> {
        let config: DockerConfig = serde_json::from_str(text)
            .map_err(|e| format!("not a docker config (JSON with \"auths\"): {e}"))?;
        let mut logins = BTreeMap::new();
        for (key, entry) in config.auths {
            let login = match (entry.auth, entry.username, entry.password) {
                (Some(auth), _, _) if !auth.is_empty() => {
                    let decoded = base64::engine::general_purpose::STANDARD
                        .decode(auth.trim())
                        .map_err(|e| format!("auths.{key}.auth: not base64: {e}"))?;
                    let text = String::from_utf8(decoded)
                        .map_err(|_| format!("auths.{key}.auth: not UTF-8 once decoded"))?;
                    let Some((user, password)) = text.split_once(':') else {
                        return Err(format!(
                            "auths.{key}.auth: not base64 of USER:PASSWORD (no colon)"
                        ));
                    };
                    Login {
                        username: user.to_owned(),
                        password: password.to_owned(),
                    }
                }
                (_, Some(username), Some(password)) => Login { username, password },
                // An entry without a login (docker writes them beside a credential
                // helper): anonymous.
                _ => continue,
            };
            logins.insert(registry_of_key(&key), login);
        }
        Ok(logins)
    }

    /// The login for a registry, if the file has one.
    pub fn login(&self, registry: &str) -> Option<&Login> {
        self.logins.get(registry)
    }

    pub(super) fn auth_for(&self, registry: &str) -> oci_client::secrets::RegistryAuth {
        match self.login(registry) {
            Some(l) => {
                oci_client::secrets::RegistryAuth::Basic(l.username.clone(), l.password.clone())
            }
            None => oci_client::secrets::RegistryAuth::Anonymous,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logins_come_from_auth_or_from_username_and_password() {
        let auth = base64::engine::general_purpose::STANDARD.encode("berth:s3cret:with-colon");
        let text = format!(
            r#"{{"auths": {{
                "127.0.0.1:5000": {{"auth": "{auth}"}},
                "https://index.docker.io/v1/": {{"username": "u", "password": "p"}},
                "http://registry.local:8080": {{"auth": "{}"}},
                "ghcr.io": {{}}
            }}, "credsStore": "desktop"}}"#,
            base64::engine::general_purpose::STANDARD.encode("a:b")
        );
        let logins = Credentials::parse(&text).unwrap();
        let c = Credentials { file: None, logins };
        let l = c.login("127.0.0.1:5000").unwrap();
        assert_eq!(
            (l.username.as_str(), l.password.as_str()),
            ("berth", "s3cret:with-colon")
        );
        assert_eq!(c.login("docker.io").unwrap().username, "u");
        assert_eq!(c.login("registry.local:8080").unwrap().password, "b");
        assert_eq!(c.login("ghcr.io"), None);
        assert!(
            !format!("{l:?}").contains("s3cret"),
            "a Debug print shows no password"
        );
    }

    #[test]
    fn a_bad_file_says_what_is_wrong() {
        assert!(
            Credentials::parse("42")
                .unwrap_err()
                .contains("not a docker config")
        );
        let e = Credentials::parse(r#"{"auths": {"r": {"auth": "%%%"}}}"#).unwrap_err();
        assert!(e.contains("auths.r.auth: not base64"), "{e}");
        let no_colon = base64::engine::general_purpose::STANDARD.encode("nocolon");
        let e = Credentials::parse(&format!(
            r#"{{"auths": {{"r": {{"auth": "{no_colon}"}}}}}}"#
        ))
        .unwrap_err();
        assert!(e.contains("no colon"), "{e}");
    }
}
