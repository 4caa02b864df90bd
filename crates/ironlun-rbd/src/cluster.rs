//! Loading the libraries, connecting to a cluster, and a pool's images.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::args;
use crate::error::{Error, Result};
use crate::ffi;
use crate::image::Image;
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
        rados.read_conf(conf.as_deref())?;
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

    /// The pool's I/O context (blocks briefly for the OSD map).
    pub fn pool(&self, name: &str) -> Result<Pool> {
        let c = args::c_string("pool", name)?;
        let ioctx = ffi::IoCtx::create(Arc::clone(&self.rados), &c)?;
        Ok(Pool {
            ioctx: Arc::new(ioctx),
        })
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

    /// Opens an image for reading and writing.
    pub fn open(&self, name: &str) -> Result<Image> {
        let c = args::c_string("image", name)?;
        let handle = ffi::ImageHandle::open(Arc::clone(&self.ioctx), &c)?;
        Image::new(handle)
    }
}
