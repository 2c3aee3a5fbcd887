//! Ctrl-C (SIGINT): the first raises a flag that every command's loop checks —
//! it stops, drops the epoch (which stops the workers), says what was done and exits with
//! 130; a second one exits at once.

use std::sync::atomic::{AtomicBool, Ordering};

/// Exit code after an interrupt (128 + SIGINT, as shells report it).
pub const EXIT: i32 = 130;

static STOP: AtomicBool = AtomicBool::new(false);

/// Install the handler (once, at start-up). Failing to install it is not fatal: Ctrl-C
/// then kills the process the default way.
pub fn install() {
    let _ = ctrlc::set_handler(|| {
        if STOP.swap(true, Ordering::SeqCst) {
            std::process::exit(EXIT);
        }
    });
}

/// The flag, for loops and library calls that take one.
pub fn flag() -> &'static AtomicBool {
    &STOP
}

/// Whether Ctrl-C was pressed.
pub fn requested() -> bool {
    STOP.load(Ordering::Relaxed)
}
