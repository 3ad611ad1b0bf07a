//! Parsing of a command's `NAME value` options, as its declaration lists them.

use idgen_core::commands::OptionValue;

use crate::ffi::call::Call;
use crate::ffi::refusal::Refusal;

/// Reads the running command's options from argument `first` to the end: each declared
/// option's value (or `None` when absent), in the declaration's order.
#[inline]
pub fn parse_options<const N: usize>(
    call: &Call,
    first: usize,
) -> Result<[Option<OptionValue>; N], Refusal> {
    // Most calls give no option: answered here, without the parser's call.
    if call.argc() <= first {
        return Ok([None; N]);
    }
    parse_given_options(call, first)
}

#[inline(never)]
fn parse_given_options<const N: usize>(
    call: &Call,
    first: usize,
) -> Result<[Option<OptionValue>; N], Refusal> {
    call.command()
        .parse_options(first, call.argc(), |index| call.arg_bytes(index))
        .map_err(|message| Refusal::new("ERR", message))
}
