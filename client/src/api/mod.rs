//! What applications call: the [`crate::Client`], the round trips that issue IDs (and feed
//! the buffers), and the leased generator. Builds on every layer below.

pub(crate) mod client;
pub(crate) mod issuer;
pub(crate) mod leased;
