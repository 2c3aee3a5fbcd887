//! The `imgfeed` command: parse arguments, call the library, print the error chain, exit
//! with 0 (ok), 1 (data errors), 2 (usage or pipeline errors) or 70 (a bug in imgfeed).

mod cli;

fn main() {
    std::process::exit(cli::main());
}
