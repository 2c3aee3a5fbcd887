//! The `imgfeed` command: parse arguments, call the library, print the error chain, exit
//! with 0 (ok), 1 (data errors) or 2 (usage or pipeline errors).

mod cli;

fn main() {
    std::process::exit(cli::main());
}
