//! Agents: `ironlun bench agent` on each load host, `ironlun bench
//! --agents` as their controller (as IOMeter's dynamo and fio's
//! client/server).
//!
//! `proto` holds the messages and the [`BenchSpec`], the only thing an
//! agent runs; `frame` the length-prefixed JSON framing with its size
//! limits; `token` the shared token and the challenge-response proof of
//! knowing it; `clock` the ping exchange that aligns the agents' start
//! on the controller's clock; `server` the agent; `controller` the
//! controller; `merge` the exact merge of the agents' results.

pub mod clock;
pub mod controller;
pub mod frame;
pub mod merge;
pub mod proto;
pub mod server;
pub mod token;

pub use controller::{run, AgentRun};
pub use merge::merge;
pub use proto::BenchSpec;
pub use server::{serve, Agent, Opener};
pub use token::Token;
