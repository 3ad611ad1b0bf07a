pub mod args;
pub mod compose;
pub mod decode;
pub mod identity;
pub mod info;
pub mod segment_next;
pub mod snowflake_next;
pub mod table;
