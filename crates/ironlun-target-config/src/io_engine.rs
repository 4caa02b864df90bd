//! [`IoEngine`]: how commands on file and block LUNs reach the kernel
//! (`io_engine` in the file, `--io-engine` on the command line).

/// How commands on file and block LUNs reach the kernel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IoEngine {
    /// An io_uring per connection: reads, writes and cache flushes are
    /// submitted and completed on the connection's own thread. Where
    /// io_uring is unavailable the daemon says so and uses `pool`.
    #[default]
    Uring,
    /// tokio's blocking thread pool: one synchronous call per command on
    /// a pool thread (the engine before io_uring; kept to compare).
    Pool,
}

/// A name that is not an [`IoEngine`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("I/O engine '{0}' (must be uring or pool)")]
pub struct UnknownIoEngine(pub String);

impl std::str::FromStr for IoEngine {
    type Err = UnknownIoEngine;
    fn from_str(s: &str) -> Result<IoEngine, UnknownIoEngine> {
        match s {
            "uring" | "io_uring" => Ok(IoEngine::Uring),
            "pool" => Ok(IoEngine::Pool),
            other => Err(UnknownIoEngine(other.to_owned())),
        }
    }
}

impl IoEngine {
    pub fn name(self) -> &'static str {
        match self {
            IoEngine::Uring => "io_uring",
            IoEngine::Pool => "thread pool",
        }
    }

    /// Parses the value of `key` (`io_engine`, `--io-engine`).
    pub(crate) fn parse_at(key: &str, value: &str) -> Result<IoEngine, super::ConfigError> {
        value
            .parse()
            .map_err(|source| super::ConfigError::IoEngine {
                key: key.to_owned(),
                source,
            })
    }
}
