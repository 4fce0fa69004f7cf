import Foundation
import ArgumentParser
import Transport

struct BucketFS: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bucketfs",
        abstract: "Mount a Cloud Storage bucket as a filesystem.",
        version: bucketfsVersion,
        subcommands: [
            MountCommand.self, UnmountCommand.self, ListCommand.self, PutCommand.self, GetCommand.self, CopyCommand.self,
            StatusCommand.self, FuseFDMountCommand.self, CSICommand.self, PrintOptionTableCommand.self, PrintManualPageCommand.self,
        ],
        // mount(8) runs `bucketfs BUCKET MOUNTPOINT -o opts`: no subcommand.
        defaultSubcommand: MountCommand.self
    )
}

/// The entry point of the `bucketfs` executable.
public enum BucketFSMain {
    /// Parses the process's arguments and runs the chosen command, awaiting
    /// async ones; exits with the command's code. (An explicit async entry
    /// point: main.swift cannot use @main.)
    ///
    /// Runtime failures (`CLIError`) print one line and exit with their
    /// code; only a bad command line gets the parser's usage text.
    public static func run() async -> Never {
        let arguments = Array(CommandLine.arguments.dropFirst())
        do {
            try FirstWord.check(arguments)
        } catch {
            eprint("bucketfs: \(error)\nSee 'bucketfs --help'.")
            BucketFS.exit(withError: ExitCode(error.exitCode))
        }
        do {
            if arguments.first == CSICommand.configuration.commandName { try CSICommand.exec(Array(arguments.dropFirst())) }
            var command = try BucketFS.parseAsRoot(arguments)
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
            BucketFS.exit()
        } catch let error as CLIError {
            eprint("bucketfs: \(error)")
            BucketFS.exit(withError: ExitCode(error.exitCode))
        } catch {
            BucketFS.exit(withError: error)
        }
    }
}

/// `bucketfs print-option-table`: the option table of docs/mounting.md,
/// generated from `Settings` (CLITests checks the page against it).
struct PrintOptionTableCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "print-option-table", abstract: "Print the Markdown table of mount's options.", shouldDisplay: false)

    func run() {
        print(OptionTable.markdown(), terminator: "")
    }
}
