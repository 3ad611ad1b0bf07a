pub mod encodings;
pub mod snowflake_key;
