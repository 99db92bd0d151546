//! `capblock ... | head`: a reader that stops early must not make the command panic.

use std::process::{Command, Stdio};

#[test]
fn a_closed_pipe_ends_the_command_quietly() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../infra/examples/rules/p5-weekly.toml");
    let mut child = Command::new(env!("CARGO_BIN_EXE_capblock"))
        .args(["rules", "validate", "--offline", example])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("capblock runs");
    // The reader goes away before the command writes a line, as `head` does after its lines.
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("capblock ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "capblock panicked on a closed pipe: {stderr}");
    assert!(stderr.trim().is_empty(), "nothing to say on a closed pipe, said: {stderr}");
    // Ended by SIGPIPE (as `cat` or `grep` would be), or a clean exit.
    use std::os::unix::process::ExitStatusExt;
    assert!(out.status.success() || out.status.signal() == Some(13), "{:?}", out.status);
}
