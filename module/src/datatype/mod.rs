pub mod encodings;
pub mod lease_pool;
pub mod snowflake_key;
