//! Loading the libraries, connecting to a cluster, and a pool's images.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::args;
use crate::error::{Error, Result};
use crate::ffi;
use crate::ffi_object::ObjectIo;
use crate::image::Image;
use crate::object::RadosObject;
use crate::sys::{self, Api};

/// librados and librbd, loaded at run time.
#[derive(Clone, Copy)]
pub struct Library {
    api: &'static Api,
}

impl std::fmt::Debug for Library {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Library")
    }
}

impl Library {
    /// The system's `librados.so.2` and `librbd.so.1` (Debian's
    /// `librbd1`), loaded once per process. When they are missing the
    /// error says so and names the package to install.
    pub fn system() -> Result<Library> {
        sys::system().map(|api| Library { api })
    }

    /// The libraries at these paths, for tests and unusual installs. Each
    /// successful call keeps its libraries loaded until the process ends.
    ///
    /// # Safety
    /// The paths must name librados and librbd of the ABI the headers in
    /// `sys` describe (Ceph 16 or a compatible later release): any other
    /// library whose exported names match would be called through the
    /// wrong function types. Symbols that are missing are refused by name.
    #[allow(unsafe_code)]
    pub unsafe fn load_from(rados: &Path, rbd: &Path) -> Result<Library> {
        sys::load(rados.as_os_str(), rbd.as_os_str()).map(|api| Library { api })
    }
}

/// How to reach a cluster: the same settings `rbd` and `ceph` take.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterConfig {
    /// ceph.conf; `None`: librados' default search ($CEPH_CONF,
    /// /etc/ceph/ceph.conf, ~/.ceph/config, ./ceph.conf).
    pub conf: Option<PathBuf>,
    /// The client id, without "client." (`None`: "admin").
    pub client_id: Option<String>,
    /// The keyring holding the client's key (`None`: ceph.conf's).
    pub keyring: Option<PathBuf>,
    /// More configuration options, set after the file is read (for
    /// example `rados_osd_op_timeout`, `client_mount_timeout`).
    pub options: Vec<(String, String)>,
    /// The caller's own defaults: each is set after the file is read
    /// only where the file left librados' compiled-in value, so that a
    /// ceph.conf that chose a value keeps it. `options` apply after
    /// these and win over both.
    pub defaults: Vec<(String, String)>,
}

/// A connected cluster. Cheap to clone; disconnects when the last clone,
/// pool and image are gone.
#[derive(Clone)]
pub struct Cluster {
    rados: Arc<ffi::Rados>,
}

impl Cluster {
    /// Connects with the system's libraries. Blocks until the monitors
    /// answer (or `client_mount_timeout` passes): call it from a blocking
    /// context (`tokio::task::spawn_blocking`).
    pub fn connect(config: &ClusterConfig) -> Result<Cluster> {
        Cluster::connect_with(Library::system()?, config)
    }

    /// As [`Cluster::connect`], with libraries loaded by the caller.
    pub fn connect_with(lib: Library, config: &ClusterConfig) -> Result<Cluster> {
        let id = config.client_id.as_deref().unwrap_or("admin");
        let name = args::c_string("client id", &format!("client.{id}"))?;
        let rados = ffi::Rados::create(lib.api, &name)?;
        let conf = config
            .conf
            .as_deref()
            .map(|p| path_c_string("conf", p))
            .transpose()?;
        let defaults = config
            .defaults
            .iter()
            .map(|(k, v)| {
                let key = args::c_string("option", k)?;
                let before = rados.get(&key)?;
                Ok((key, before, args::c_string("option value", v)?))
            })
            .collect::<Result<Vec<_>>>()?;
        rados
            .read_conf(conf.as_deref())
            .map_err(|e| conf_error(config.conf.as_deref(), e))?;
        for (key, before, value) in &defaults {
            if rados.get(key)? == *before {
                rados.set(key, value)?;
            }
        }
        if let Some(keyring) = &config.keyring {
            rados.set(c"keyring", &path_c_string("keyring", keyring)?)?;
        }
        for (key, value) in &config.options {
            rados.set(
                &args::c_string("option", key)?,
                &args::c_string("option value", value)?,
            )?;
        }
        rados.connect()?;
        Ok(Cluster {
            rados: Arc::new(rados),
        })
    }

    /// A configuration option's value as this client holds it (after
    /// ceph.conf, [`ClusterConfig::defaults`] and `options`).
    pub fn option(&self, key: &str) -> Result<String> {
        self.rados.get(&args::c_string("option", key)?)
    }

    /// This client's address as the OSDs see it, the form `ceph osd
    /// blocklist add` takes and `rbd status` shows
    /// (`127.0.0.1:0/3361727345`): what an operator or another gateway
    /// blocklists to fence this client. Ceph 16's `rados_getaddrs`
    /// prints it so; a typed address (`v2:…`) or a bracketed vector of
    /// several is reduced to its first address without the type.
    pub fn address(&self) -> Result<String> {
        Ok(blocklist_form(&self.rados.addrs()?))
    }

    /// The pool's I/O context (blocks briefly for the OSD map).
    pub fn pool(&self, name: &str) -> Result<Pool> {
        let c = args::c_string("pool", name)?;
        let ioctx = ffi::IoCtx::create(Arc::clone(&self.rados), &c)?;
        Ok(Pool {
            ioctx: Arc::new(ioctx),
            name: c,
        })
    }
}

/// The address types librados prints before an address (`entity_addr_t`).
const ADDRESS_TYPES: [&str; 3] = ["v1:", "v2:", "any:"];

/// The first address of what `rados_getaddrs` printed (`127.0.0.1:0/N`,
/// `v1:127.0.0.1:0/N` or `[v2:…,v1:…]`), without its type: the form the
/// OSD map's blocklist and `rbd status` show.
fn blocklist_form(printed: &str) -> String {
    let s = printed.trim();
    let typed = |x: &&str| ADDRESS_TYPES.iter().any(|t| x.starts_with(t));
    let inner = s
        .strip_prefix('[')
        .and_then(|x| x.strip_suffix(']'))
        .filter(typed)
        .unwrap_or(s);
    let first = inner.split(',').next().unwrap_or(inner);
    let bare = ADDRESS_TYPES
        .iter()
        .find_map(|t| first.strip_prefix(t))
        .unwrap_or(first);
    bare.to_owned()
}

/// ENOENT: what `rados_conf_read_file` answers when the file, or every
/// place it searched, is missing.
const ENOENT: i32 = 2;

/// A failed `rados_conf_read_file` as the operator should read it: a
/// missing file named, with what to do, rather than a bare errno.
fn conf_error(given: Option<&Path>, e: Error) -> Error {
    if e.errno() != Some(ENOENT) {
        return e;
    }
    match given {
        Some(path) => Error::ConfMissing(format!(
            "conf={}: no such file (rados_conf_read_file: ENOENT)",
            path.display()
        )),
        None => Error::ConfMissing(no_conf_message(std::env::var_os("CEPH_CONF"))),
    }
}

/// Where librados looked when no `conf=` was given: `$CEPH_CONF` alone
/// when it is set, else its default list (Ceph 16's
/// `CEPH_CONF_FILE_DEFAULT`).
fn no_conf_message(ceph_conf: Option<std::ffi::OsString>) -> String {
    match ceph_conf {
        Some(v) if !v.is_empty() => format!(
            "no conf= given and CEPH_CONF={} missing: give conf=PATH or fix CEPH_CONF",
            v.to_string_lossy()
        ),
        _ => "no conf= given and /etc/ceph/ceph.conf missing (nor ~/.ceph/ceph.conf or \
              ./ceph.conf): give conf=PATH, or install the cluster's ceph.conf there"
            .to_owned(),
    }
}

fn path_c_string(what: &str, p: &Path) -> Result<std::ffi::CString> {
    let bytes: &OsStr = p.as_os_str();
    std::ffi::CString::new(bytes.as_bytes()).map_err(|_| {
        Error::InvalidArgument(format!("{what} path {} contains a NUL byte", p.display()))
    })
}

/// A pool: creates, removes and opens images. Calls block.
#[derive(Clone)]
pub struct Pool {
    ioctx: Arc<ffi::IoCtx>,
    name: std::ffi::CString,
}

impl Pool {
    /// Creates an image of `size` bytes with objects of 2^`order` bytes
    /// (`None`: librbd's default, 4 MiB) and the pool's default features.
    pub fn create_image(&self, name: &str, size: u64, order: Option<u8>) -> Result<()> {
        let c = args::c_string("image", name)?;
        self.ioctx.create_image(&c, size, order.unwrap_or(0))
    }

    /// Removes an image (it must not be open anywhere).
    pub fn remove_image(&self, name: &str) -> Result<()> {
        let c = args::c_string("image", name)?;
        self.ioctx.remove_image(&c)
    }

    /// One object of the pool, with an I/O context of its own (blocks
    /// briefly for the OSD map). The object need not exist.
    pub fn object(&self, name: &str) -> Result<RadosObject> {
        if name.is_empty() || name.len() > crate::object::MAX_OBJECT_NAME {
            return Err(Error::InvalidArgument(format!(
                "object name of {} bytes",
                name.len()
            )));
        }
        let oid = args::c_string("object", name)?;
        let ioctx = ffi::IoCtx::create(Arc::clone(&self.ioctx.cluster), &self.name)?;
        Ok(RadosObject::new(ObjectIo::new(ioctx, oid)))
    }

    /// Opens an image for reading and writing.
    pub fn open(&self, name: &str) -> Result<Image> {
        let c = args::c_string("image", name)?;
        let handle = ffi::ImageHandle::open(Arc::clone(&self.ioctx), &c)?;
        Image::new(handle)
    }

    /// Opens an image read-only as it was at snapshot `snap`.
    pub fn open_snapshot(&self, name: &str, snap: &str) -> Result<Image> {
        let c = args::c_string("image", name)?;
        let s = args::c_string("snapshot", snap)?;
        let handle = ffi::ImageHandle::open_snapshot(Arc::clone(&self.ioctx), &c, &s)?;
        Image::new(handle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn enoent() -> Error {
        Error::Ceph {
            call: "rados_conf_read_file",
            errno: ENOENT,
        }
    }

    #[test]
    fn the_address_is_given_as_the_blocklist_shows_it() {
        let a = "127.0.0.1:0/3361727345";
        assert_eq!(blocklist_form(a), a);
        assert_eq!(blocklist_form(&format!("v1:{a}")), a);
        assert_eq!(blocklist_form(&format!("any:{a}\n")), a);
        assert_eq!(blocklist_form(&format!("[v2:{a},v1:{a}]")), a);
        // IPv6 keeps its own brackets.
        let six = "[::1]:0/42";
        assert_eq!(blocklist_form(six), six);
        assert_eq!(blocklist_form(&format!("[any:{six}]")), six);
    }

    #[test]
    fn a_missing_conf_is_named_not_a_bare_errno() {
        let given = conf_error(Some(Path::new("/srv/c.conf")), enoent()).to_string();
        assert!(
            given.starts_with("conf=/srv/c.conf: no such file"),
            "{given}"
        );
        let other = Error::Ceph {
            call: "rados_conf_read_file",
            errno: 22,
        };
        assert_eq!(conf_error(None, other.clone()).errno(), Some(22));
        let searched = no_conf_message(None);
        assert!(
            searched.starts_with("no conf= given and /etc/ceph/ceph.conf missing"),
            "{searched}"
        );
        let env = no_conf_message(Some("/x/ceph.conf".into()));
        assert!(
            env.starts_with("no conf= given and CEPH_CONF=/x/ceph.conf missing"),
            "{env}"
        );
    }

    /// The real librados, on a machine without any ceph.conf: the error
    /// is the one above, not `rados_conf_read_file: No such file`.
    #[test]
    fn librados_without_any_conf_says_what_is_missing() {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let present: Vec<PathBuf> = [
            Some(PathBuf::from("/etc/ceph/ceph.conf")),
            home.map(|h| h.join(".ceph/ceph.conf")),
            Some(PathBuf::from("ceph.conf")),
        ]
        .into_iter()
        .flatten()
        .filter(|p| p.exists())
        .collect();
        let skip = |why: String| {
            let _ = writeln!(std::io::stderr(), "\n*** SKIPPED: {why} ***\n");
        };
        if std::env::var_os("CEPH_CONF").is_some() || !present.is_empty() {
            return skip(format!("a ceph.conf is present ({present:?} or CEPH_CONF)"));
        }
        let lib = match Library::system() {
            Ok(lib) => lib,
            Err(e) => {
                assert!(std::env::var("CI").as_deref() != Ok("true"), "{e}");
                return skip(e.to_string());
            }
        };
        let err = Cluster::connect_with(lib, &ClusterConfig::default())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.starts_with("no conf= given and /etc/ceph/ceph.conf missing"),
            "{err}"
        );
    }
}
