//! Finding the control-plane binaries: `KUBEBUILDER_ASSETS`, else the newest build of
//! `tools/control-plane/build.sh` under the target directory; kubectl from there or `PATH`.

use std::path::{Path, PathBuf};

use crate::error::EnvtestError;

/// The environment variable that names a directory of control-plane binaries, as
/// controller-runtime's envtest and setup-envtest use it.
pub const ASSETS_ENV: &str = "KUBEBUILDER_ASSETS";

/// Set to `1` (CI does), a test that needs a binary the machine lacks (kubectl) fails instead
/// of skipping: see [`kubectl_for_tests`] and [`binaries_for_test`].
pub const REQUIRE_BINARIES_ENV: &str = "KCR_REQUIRE_BINARIES";

/// Where the binaries of one control plane are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binaries {
    /// The directory they were found in.
    pub dir: PathBuf,
    /// `etcd`.
    pub etcd: PathBuf,
    /// `kube-apiserver`.
    pub kube_apiserver: PathBuf,
    /// `kube-controller-manager`, when the directory has one (setup-envtest's do not: then the
    /// control plane runs without garbage collection and the namespace controller).
    pub kube_controller_manager: Option<PathBuf>,
    /// `kubectl`, when the directory has one.
    pub kubectl: Option<PathBuf>,
}

impl Binaries {
    /// The binaries in `dir`, if it holds at least etcd and kube-apiserver.
    pub fn in_dir(dir: &Path) -> Option<Binaries> {
        let file = |name: &str| Some(dir.join(name)).filter(|p| p.is_file());
        Some(Binaries {
            dir: dir.to_path_buf(),
            etcd: file("etcd")?,
            kube_apiserver: file("kube-apiserver")?,
            kube_controller_manager: file("kube-controller-manager"),
            kubectl: file("kubectl"),
        })
    }

    /// Find the binaries: `KUBEBUILDER_ASSETS` when set (and then only there), else the newest
    /// `control-plane/<version>-<os>-<arch>/` directory under the target directories
    /// (`target_dirs`). The error lists every place searched and the command that builds them.
    pub fn find() -> Result<Binaries, EnvtestError> {
        if let Some(dir) = std::env::var_os(ASSETS_ENV).filter(|d| !d.is_empty()) {
            let dir = PathBuf::from(dir);
            return Binaries::in_dir(&dir).ok_or_else(|| EnvtestError::BinariesNotFound {
                searched: format!("{ASSETS_ENV}={}", dir.display()),
            });
        }
        let mut searched = Vec::new();
        for target in target_dirs() {
            let root = target.join("control-plane");
            searched.push(root.display().to_string());
            if let Some(found) = newest_build(&root) {
                return Ok(found);
            }
        }
        Err(EnvtestError::BinariesNotFound {
            searched: searched.join(", "),
        })
    }
}

/// The newest `<version>-<os>-<arch>` directory under `root` that holds a control plane.
fn newest_build(root: &Path) -> Option<Binaries> {
    let mut builds: Vec<(Vec<u64>, Binaries)> = std::fs::read_dir(root)
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let version = name.split('-').next()?;
            let key: Vec<u64> = version
                .split('.')
                .map(str::parse)
                .collect::<Result<_, _>>()
                .ok()?;
            Some((key, Binaries::in_dir(&entry.path())?))
        })
        .collect();
    builds.sort_by(|a, b| a.0.cmp(&b.0));
    builds.pop().map(|(_, b)| b)
}

/// The directories that may hold `control-plane/`: `CARGO_TARGET_DIR` when set, the `target`
/// directory the running executable lives in (test binaries sit in `target/debug/deps`), and
/// the workspace's `target` as this crate was compiled.
pub fn target_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR").filter(|d| !d.is_empty()) {
        dirs.push(PathBuf::from(dir));
    }
    if let Ok(exe) = std::env::current_exe() {
        // target/<profile>/deps/<test> or target/<profile>/<bin>: the first ancestor that
        // has a control-plane folder, else the one named `target`.
        for dir in exe.ancestors().skip(1) {
            if dir.join("control-plane").is_dir() || dir.file_name().is_some_and(|n| n == "target")
            {
                dirs.push(dir.to_path_buf());
                break;
            }
        }
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("target");
    dirs.push(workspace.canonicalize().unwrap_or(workspace));
    dirs.dedup();
    dirs
}

/// kubectl for tests: the control-plane build's (or `KUBEBUILDER_ASSETS`') when there is one,
/// else the first `kubectl` on `PATH`. `None` when there is neither.
pub fn kubectl_path() -> Option<PathBuf> {
    if let Some(path) = Binaries::find().ok().and_then(|b| b.kubectl) {
        return Some(path);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("kubectl"))
        .find(|p| p.is_file())
}

/// The control-plane binaries for a test that needs the real backend, by the rule
/// [`kubectl_for_tests`] uses for kubectl: `Ok(Some(_))` when [`Binaries::find`] finds them;
/// `Ok(None)` when it does not, after printing `SKIPPED <test>: <why>` on stdout (the test then
/// returns early, and the test output says it did not run); and [`Binaries::find`]'s error when
/// `KCR_REQUIRE_BINARIES=1` asks for every binary to be there, as CI does, so that a missing
/// control plane fails the run instead of skipping its tests.
///
/// ```no_run
/// # fn main() -> Result<(), kcr_envtest::EnvtestError> {
/// let Some(_binaries) = kcr_envtest::binaries_for_test("my_real_backend_test")? else {
///     return Ok(()); // skipped, and said so
/// };
/// // ... start a TestApiServer with Backend::Real ...
/// # Ok(())
/// # }
/// ```
pub fn binaries_for_test(test: &str) -> Result<Option<Binaries>, EnvtestError> {
    let required = std::env::var_os(REQUIRE_BINARIES_ENV).is_some_and(|v| v == "1");
    skip_unless_required(test, Binaries::find(), required)
}

/// [`binaries_for_test`]'s rule on what [`Binaries::find`] gave.
fn skip_unless_required(
    test: &str,
    found: Result<Binaries, EnvtestError>,
    required: bool,
) -> Result<Option<Binaries>, EnvtestError> {
    match found {
        Ok(found) => Ok(Some(found)),
        Err(e) if required => Err(e),
        Err(e) => {
            println!("SKIPPED {test}: {e}");
            Ok(None)
        }
    }
}

/// kubectl for a test that needs it: `Ok(Some(path))` when [`kubectl_path`] finds one,
/// `Ok(None)` when it does not (the test skips, saying so), and an error naming where to get
/// one when `KCR_REQUIRE_BINARIES=1` asks for every binary to be there.
pub fn kubectl_for_tests() -> Result<Option<PathBuf>, EnvtestError> {
    if let Some(path) = kubectl_path() {
        return Ok(Some(path));
    }
    if std::env::var_os(REQUIRE_BINARIES_ENV).is_some_and(|v| v == "1") {
        return Err(EnvtestError::KubectlNotFound);
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(dir: &Path, names: &[&str]) {
        std::fs::create_dir_all(dir).unwrap();
        for n in names {
            std::fs::write(dir.join(n), b"").unwrap();
        }
    }

    #[test]
    fn missing_binaries_skip_a_test_unless_required() {
        let tmp = tempfile::tempdir().unwrap();
        touch(tmp.path(), &["etcd", "kube-apiserver"]);
        let found = Binaries::in_dir(tmp.path()).unwrap();
        for required in [false, true] {
            let got = skip_unless_required("t", Ok(found.clone()), required).unwrap();
            assert_eq!(got.as_ref(), Some(&found));
        }
        let missing = || {
            Err(EnvtestError::BinariesNotFound {
                searched: "/nowhere".into(),
            })
        };
        assert_eq!(skip_unless_required("t", missing(), false).unwrap(), None);
        let err = skip_unless_required("t", missing(), true).unwrap_err();
        assert!(err.to_string().contains("/nowhere"), "{err}");
    }

    #[test]
    fn a_directory_needs_etcd_and_kube_apiserver() {
        let tmp = tempfile::tempdir().unwrap();
        touch(tmp.path(), &["etcd"]);
        assert_eq!(Binaries::in_dir(tmp.path()), None);
        touch(tmp.path(), &["kube-apiserver"]);
        let found = Binaries::in_dir(tmp.path()).unwrap();
        assert_eq!(found.kube_controller_manager, None);
        assert_eq!(found.kubectl, None);
        touch(tmp.path(), &["kube-controller-manager", "kubectl"]);
        let found = Binaries::in_dir(tmp.path()).unwrap();
        assert!(found.kube_controller_manager.is_some() && found.kubectl.is_some());
    }

    #[test]
    fn the_newest_complete_build_wins() {
        let tmp = tempfile::tempdir().unwrap();
        let all = ["etcd", "kube-apiserver"];
        touch(&tmp.path().join("1.34.2-linux-amd64"), &all);
        touch(&tmp.path().join("1.34.10-linux-amd64"), &all);
        touch(&tmp.path().join("1.35.0-linux-amd64"), &["etcd"]); // incomplete
        touch(&tmp.path().join("notes"), &all); // not a version
        let found = newest_build(tmp.path()).unwrap();
        assert!(
            found.dir.ends_with("1.34.10-linux-amd64"),
            "{:?}",
            found.dir
        );
        assert!(newest_build(&tmp.path().join("missing")).is_none());
    }
}
