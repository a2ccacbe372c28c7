fn main() -> std::process::ExitCode {
    atc::main()
}
