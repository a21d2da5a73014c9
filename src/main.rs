//! The `bts` command.

fn main() {
    bts::cli::main()
}
