//! The `imgfeed` command: parse arguments, call the library, print the error chain, exit
//! with 0 (ok), 1 (data errors), 2 (usage, pipeline, dataset or output errors) or 70 (a bug
//! in imgfeed). The command itself is library code ([`imgfeed::main_with_args`]), which
//! the Python wheel's `imgfeed` runs too.

fn main() {
    std::process::exit(imgfeed::main_with_args(std::env::args_os()));
}
