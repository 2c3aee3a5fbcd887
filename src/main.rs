//! The `imgfeed` command: parse arguments, call the library, print the error chain, exit
//! with 0 (ok), 1 (data errors), 2 (usage, pipeline, dataset or output errors) or 70 (a bug
//! in imgfeed).

mod cli;

fn main() {
    quiet_on_closed_pipe();
    std::process::exit(cli::main());
}

/// A closed output (`imgfeed run ... | head -1`) ends the process quietly, as it ends `cat`
/// or `seq`: the default action of SIGPIPE, which Rust's runtime otherwise ignores (so that
/// the next `println!` would panic on the write's `EPIPE`).
fn quiet_on_closed_pipe() {
    #[cfg(unix)]
    // SAFETY: `signal` with SIG_DFL installs no handler; it is called once, before any
    // thread is started.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
