//! `cargo kcr`: the command; everything it does is in the `cargo_kcr` library.

use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = match cargo_kcr::cli::parse(std::env::args_os()) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    match cargo_kcr::cli::run(&cli, std::env::var_os(cargo_kcr::cli::RECORD_ENV)) {
        Ok(outcome) if outcome.is_ok() => {
            print!("{outcome}");
            ExitCode::SUCCESS
        }
        Ok(outcome) => {
            eprint!("{outcome}");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
