//! Why a command stops before doing its work: the error reply it sends instead.

/// An error reply to send: `CODE message`.
#[derive(Debug)]
pub struct Refusal(pub String);

impl Refusal {
    /// A refusal whose reply is `-CODE message`.
    pub fn new(code: &str, message: impl std::fmt::Display) -> Self {
        Refusal(format!("{code} {message}"))
    }
}

impl From<idgen_core::IdError> for Refusal {
    fn from(error: idgen_core::IdError) -> Self {
        Refusal::new(error.code(), error)
    }
}

/// The standard Redis reply for a key of another type.
pub fn wrong_type() -> Refusal {
    Refusal("WRONGTYPE Operation against a key holding the wrong kind of value".into())
}
