//! `ladder`: the one entry point (API.md §19). Exit codes: 0 success, 1 failure with a
//! one-line reason on stderr, 2 bad usage.

mod cmd;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = match cmd::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    if let Some(problem) = cmd::usage_problem(&cli) {
        use clap::CommandFactory;
        let _ = cmd::Cli::command()
            .error(clap::error::ErrorKind::ArgumentConflict, problem)
            .print();
        return ExitCode::from(2);
    }
    cmd::init_logging(&cli.log);
    match cmd::run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(reason) => {
            cmd::stdout::print_error(format_args!("ladder: {reason}"));
            ExitCode::from(1)
        }
    }
}
