import Foundation
import ArgumentParser

struct BucketFS: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bucketfs",
        abstract: "Mount a Cloud Storage bucket as a filesystem.",
        subcommands: [MountCommand.self, UnmountCommand.self, ListCommand.self, PutCommand.self, GetCommand.self, CopyCommand.self, StatusCommand.self]
    )
}

extension BucketFS {
    /// Parses `arguments` and runs the chosen command, awaiting async ones;
    /// exits with the command's code. (An explicit async entry point:
    /// main.swift cannot use @main.)
    static func run(arguments given: [String]) async -> Never {
        let arguments: [String]
        do {
            arguments = try await MountConfiguration.apply(to: given, environment: ProcessInfo.processInfo.environment)
        } catch let error as CLIError {
            eprint("bucketfs: \(error)")
            exit(withError: ExitCode(error.exitCode))
        } catch {
            eprint("bucketfs: \(error)")
            exit(withError: ExitCode(64))
        }
        do {
            var command = try parseAsRoot(arguments)
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
            exit()
        } catch {
            exit(withError: error)
        }
    }
}
