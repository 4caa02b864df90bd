//! Writes the seed corpus: `fuzz-seeds DIR` puts each seed at
//! `DIR/<target>/<name>`, replacing what was there.

#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: fuzz-seeds DIR");
        return ExitCode::from(2);
    };
    for target in ironlun_fuzz::TARGETS {
        let d = dir.join(target);
        if d.exists() {
            if let Err(e) = std::fs::remove_dir_all(&d) {
                eprintln!("fuzz-seeds: cannot clear {}: {e}", d.display());
                return ExitCode::FAILURE;
            }
        }
    }
    let seeds = ironlun_fuzz::seeds::all();
    for s in &seeds {
        let d = dir.join(s.target);
        let path = d.join(s.name);
        if let Err(e) = std::fs::create_dir_all(&d).and_then(|()| std::fs::write(&path, &s.bytes)) {
            eprintln!("fuzz-seeds: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    println!("wrote {} seeds under {}", seeds.len(), dir.display());
    ExitCode::SUCCESS
}
