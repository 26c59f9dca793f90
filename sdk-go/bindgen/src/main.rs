//! `berth-go-bindgen bindings WIT_DIR OUT.go` writes the Go bindings;
//! `berth-go-bindgen component WIT_DIR CORE.wasm OUT.wasm` makes the component;
//! `berth-go-bindgen build WIT_DIR PLUGIN_DIR OUT.wasm` does all of it for a Go
//! plugin directory (`$GO`, else `go`).

use std::path::Path;

use anyhow::{Result, bail};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["bindings", wit, out] => {
            std::fs::write(out, berth_go_bindgen::bindings(Path::new(wit))?)?;
        }
        ["component", wit, core, out] => {
            let core = std::fs::read(core)?;
            std::fs::write(out, berth_go_bindgen::componentize(Path::new(wit), &core)?)?;
        }
        ["build", wit, dir, out] => {
            let opts = berth_go_bindgen::GoBuild {
                go: std::env::var_os("GO").unwrap_or_else(|| "go".into()).into(),
                wit: berth_go_bindgen::wit_source(Path::new(wit))?,
            };
            std::fs::write(out, berth_go_bindgen::build(Path::new(dir), &opts)?)?;
        }
        _ => bail!(
            "usage: berth-go-bindgen bindings WIT_DIR OUT.go | component WIT_DIR CORE.wasm OUT.wasm | build WIT_DIR PLUGIN_DIR OUT.wasm"
        ),
    }
    Ok(())
}
