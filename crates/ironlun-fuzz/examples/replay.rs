//! Replays one input through a harness, outside libFuzzer, and prints what
//! it exercised: `cargo run -p ironlun-fuzz --example replay -- TARGET FILE`.

use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [target, file] = args.as_slice() else {
        eprintln!(
            "usage: replay TARGET FILE (targets: {:?})",
            ironlun_fuzz::TARGETS
        );
        return ExitCode::from(2);
    };
    let data = match std::fs::read(file) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("replay: {file}: {e}");
            return ExitCode::FAILURE;
        }
    };
    match ironlun_fuzz::run(target, &data) {
        Some(outcome) => {
            println!("{outcome}");
            ExitCode::SUCCESS
        }
        None => {
            eprintln!(
                "replay: unknown target {target} (one of {:?})",
                ironlun_fuzz::TARGETS
            );
            ExitCode::from(2)
        }
    }
}
