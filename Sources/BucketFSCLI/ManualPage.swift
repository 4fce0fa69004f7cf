import ArgumentParser
import Foundation

/// `bucketfs print-manual-page`: the man page, in mdoc, made by the binary
/// from its own commands, so scripts/install.sh installs a page that matches
/// the binary it installs without building anything.
struct PrintManualPageCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "print-manual-page", abstract: "Print the man page (mdoc).", shouldDisplay: false)

    @Option(help: ArgumentHelp("The page's date (default: today).", valueName: "YYYY-MM-DD"))
    var date: String?

    func run() throws {
        let day: ManualPage.Day
        if let date {
            guard let parsed = ManualPage.Day(date) else { throw ValidationError("--date must be YYYY-MM-DD, not \(date)") }
            day = parsed
        } else {
            day = ManualPage.Day(Date())
        }
        print(try ManualPage.render(BucketFS.self, date: day), terminator: "")
    }
}

/// The man page of `bucketfs`: NAME, SYNOPSIS and DESCRIPTION from the
/// commands' help (ArgumentParser's JSON dump of it, the input of its own
/// generate-manual tool), then ENVIRONMENT, FILES, EXIT STATUS and SEE ALSO,
/// written here. Hidden commands and options stay hidden. Every text line is
/// escaped so that groff neither warns nor hyphenates a technical word
/// (`allow_other` must survive a line break), and an indented line of a
/// discussion is a literal display (the fstab example).
enum ManualPage {
    /// The part of ArgumentParser's `--experimental-dump-help` JSON
    /// (ToolInfoV0) the page uses.
    struct Tool: Decodable { var command: Command }
    struct Command: Decodable {
        var commandName: String
        var abstract: String?
        var discussion: String?
        var shouldDisplay: Bool?
        var defaultSubcommand: String?
        var subcommands: [Command]?
        var arguments: [Argument]?

        var displayed: Bool { shouldDisplay ?? true }
        var shownArguments: [Argument] { (arguments ?? []).filter(\.shouldDisplay) }
        var shownSubcommands: [Command] { (subcommands ?? []).filter { $0.displayed && $0.commandName != "help" } }
    }
    struct Argument: Decodable {
        struct Name: Decodable { var kind: String; var name: String }
        var kind: String
        var shouldDisplay: Bool
        var sectionTitle: String?
        var isOptional: Bool
        var isRepeating: Bool
        var names: [Name]?
        var valueName: String?
        var defaultValue: String?
        var abstract: String?
        var discussion: String?
    }

    struct Day {
        let year: Int, month: Int, day: Int

        init?(_ text: String) {
            let parts = text.split(separator: "-").compactMap { Int($0) }
            guard parts.count == 3, (1...12).contains(parts[1]), (1...31).contains(parts[2]) else { return nil }
            (year, month, day) = (parts[0], parts[1], parts[2])
        }

        init(_ date: Date) {
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = TimeZone(identifier: "UTC")!
            let parts = calendar.dateComponents([.year, .month, .day], from: date)
            (year, month, day) = (parts.year!, parts.month!, parts.day!)
        }

        /// mdoc's `.Dd` form: "November 27, 2026".
        var mdoc: String {
            let months = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
                          "October", "November", "December"]
            return "\(months[month - 1]) \(day), \(year)"
        }
    }

    static func render(_ root: any ParsableCommand.Type, date: Day) throws -> String {
        let tool = try JSONDecoder().decode(Tool.self, from: Data(root._dumpHelp().utf8))
        let command = tool.command
        var page = [".Dd \(date.mdoc)", ".Dt \(command.commandName.uppercased()) 1", ".Os", ".Sh NAME",
                    ".Nm \(command.commandName)"]
        if let abstract = command.abstract { page.append(".Nd " + escape(abstract.trimmingCharacters(in: ["."]))) }

        page.append(".Sh SYNOPSIS")
        for subcommand in command.shownSubcommands {
            page += [".Nm", subcommand.commandName == command.defaultSubcommand
                ? ".Op Cm \(escape(subcommand.commandName))" : ".Cm \(escape(subcommand.commandName))"]
            page += synopsis(of: subcommand)
        }
        page += [".Nm"] + synopsis(of: command)

        page.append(".Sh DESCRIPTION")
        let rootText = paragraphs([command.discussion].compactMap { $0 })
        page += rootText
        if let fallback = command.defaultSubcommand {
            page += (rootText.isEmpty ? [] : [".Pp"]) + ["Without a subcommand the arguments are those of", ".Cm \(escape(fallback)) ,",
                     "which is how", ".Xr mount 8", "runs", ".Nm ."]
        }
        page += options(of: command)
        for subcommand in command.shownSubcommands {
            page.append(".Ss \(escape(subcommand.commandName))")
            page += paragraphs([subcommand.abstract, subcommand.discussion].compactMap { $0 })
            page += options(of: subcommand)
        }
        page += fixedSections.map { $0.hasPrefix(".") ? $0 : escape($0) }
        return page.joined(separator: "\n") + "\n"
    }

    /// A command's line in SYNOPSIS: `[options]`, then its positional arguments.
    static func synopsis(of command: Command) -> [String] {
        let arguments = command.shownArguments
        var lines = arguments.contains { $0.kind != "positional" } ? [".Op Ar options"] : []
        for argument in arguments where argument.kind == "positional" {
            let name = "Ar \(escape(argument.valueName ?? "value"))" + (argument.isRepeating ? " ..." : "")
            lines.append(argument.isOptional ? ".Op \(name)" : ".\(name)")
        }
        return lines
    }

    /// A command's arguments and options as tagged lists, one per section title.
    static func options(of command: Command) -> [String] {
        var lines: [String] = []
        var openTitle: String?? = .none
        for argument in command.shownArguments {
            if openTitle != .some(argument.sectionTitle) {
                if openTitle != nil { lines.append(".El") }
                if let title = argument.sectionTitle { lines += [".Pp", ".Sy " + macroWords(title) + " :"] }
                lines.append(".Bl -tag -width Ds")
                openTitle = .some(argument.sectionTitle)
            }
            lines.append(".It " + itemTitle(argument))
            var abstract = argument.abstract ?? ""
            if let fallback = argument.defaultValue, !fallback.isEmpty, argument.kind != "flag" {
                abstract += " (default: \(fallback))"   // as --help shows it
            }
            lines += paragraphs([abstract, argument.discussion ?? ""])
        }
        if openTitle != nil { lines.append(".El") }
        return lines
    }

    static func itemTitle(_ argument: Argument) -> String {
        let value = "Ar \(escape(argument.valueName ?? "value"))" + (argument.isRepeating ? " ..." : "")
        guard argument.kind != "positional" else { return value }
        let names = (argument.names ?? []).map { name in
            switch name.kind {
            case "long": "Fl " + escape("-" + name.name)
            default: "Fl " + escape(name.name)
            }
        }
        return names.joined(separator: " , ") + (argument.kind == "option" ? " " + value : "")
    }

    /// Text as mdoc: paragraphs separated by `.Pp`, runs of indented lines
    /// as literal displays; never an empty line (groff warns about those).
    static func paragraphs(_ texts: [String]) -> [String] {
        var lines: [String] = []
        let blocks = texts.flatMap { $0.components(separatedBy: "\n\n") }
            .filter { !$0.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty }
        for block in blocks {
            if !lines.isEmpty { lines.append(".Pp") }
            var prose: [String] = []
            var literal: [String] = []
            func flushProse() {
                if !prose.isEmpty { lines.append(escape(prose.joined(separator: " "))) }
                prose = []
            }
            func flushLiteral() {
                if !literal.isEmpty { lines += [".Bd -literal -offset indent"] + literal.map(escapeLiteral) + [".Ed"] }
                literal = []
            }
            for line in block.split(separator: "\n", omittingEmptySubsequences: true).map(String.init) {
                if line.hasPrefix("  ") {
                    flushProse()
                    literal.append(line.trimmingCharacters(in: .whitespaces))
                } else {
                    flushLiteral()
                    prose.append(line.trimmingCharacters(in: .whitespaces))
                }
            }
            flushProse()
            flushLiteral()
        }
        return lines
    }

    /// roff's names for the characters beyond ASCII the help texts use,
    /// which every output device has (man(1) in the C locale renders ASCII).
    static let specialCharacters: [Unicode.Scalar: String] = [
        "\u{2026}": "...", "\u{2014}": "\\(em", "\u{2013}": "\\(en", "\u{00D7}": "\\(mu", "\u{2264}": "\\(<=",
        "\u{2265}": "\\(>=", "\u{00B1}": "\\(+-", "\u{2192}": "\\(->",
    ]

    /// Characters beyond ASCII by their roff names, else as groff's
    /// `\[uXXXX]`, so that the page reads the same whatever encoding man(1)
    /// assumes.
    static func asciiOnly(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            if scalar.isASCII {
                out.unicodeScalars.append(scalar)
            } else if let name = specialCharacters[scalar] {
                out += name
            } else {
                let hex = String(scalar.value, radix: 16, uppercase: true)
                out += "\\[u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex + "]"
            }
        }
        return out
    }

    /// One text line: backslashes and minus signs escaped, a leading
    /// control character neutralised, and no word hyphenated (groff would
    /// break `allow_other` or an option's name, which a reader copies).
    static func escape(_ text: String) -> String {
        let words = text.split(separator: " ", omittingEmptySubsequences: true).map { word -> String in
            let escaped = word.replacingOccurrences(of: "\\", with: "\\e").replacingOccurrences(of: "-", with: "\\-")
            return word.count > 3 ? "\\%" + escaped : escaped
        }
        let line = asciiOnly(words.joined(separator: " "))
        return line.hasPrefix(".") || line.hasPrefix("'") ? "\\&" + line : line
    }

    /// A line of a literal display: spacing kept, nothing hyphenated there.
    static func escapeLiteral(_ line: String) -> String {
        let escaped = asciiOnly(line.replacingOccurrences(of: "\\", with: "\\e").replacingOccurrences(of: "-", with: "\\-"))
        return escaped.hasPrefix(".") || escaped.hasPrefix("'") ? "\\&" + escaped : escaped
    }

    /// Words as macro arguments: each guarded by `\&` so none is taken for a macro.
    static func macroWords(_ text: String) -> String {
        text.split(separator: " ").map { "\\&" + escape(String($0)) }.joined(separator: " ")
    }

    /// ENVIRONMENT, FILES, EXIT STATUS and SEE ALSO: macro lines as they
    /// are, text lines escaped by `render`.
    static let fixedSections: [String] = [
        ".Sh ENVIRONMENT",
        ".Bl -tag -width Ds",
        ".It Ev BUCKETFS_ Ns Ar OPTION",
        "Each long option of", ".Cm mount", "that the option table of", ".Pa docs/mounting.md",
        "marks, upper case with underscores, e.g.", ".Ev BUCKETFS_STAT_TTL=30 .",
        "The command line and", ".Fl o", "win over it; it wins over the config file.",
        ".It Ev BUCKETFS_CONFIG",
        "The config file, when", ".Fl \\-config", "is not given.",
        ".It Ev STORAGE_EMULATOR_HOST",
        "The storage endpoint when", ".Fl \\-endpoint", "is not given; no credentials are sent to it.",
        ".It Ev GOOGLE_APPLICATION_CREDENTIALS",
        "The credentials file Application Default Credentials try first.",
        ".It Ev CLOUDSDK_CONFIG",
        "gcloud's configuration directory, where Application Default Credentials look for",
        ".Pa application_default_credentials.json .",
        ".It Ev GCE_METADATA_HOST , Ev NO_GCE_CHECK",
        "The metadata server Application Default Credentials try last, and",
        ".Ql true", "to skip it.",
        ".It Ev FIREBASE_CONFIG , Ev FIREBASE_STORAGE_EMULATOR_HOST , Ev FIREBASE_AUTH_EMULATOR_HOST",
        "A Firebase app's configuration (JSON or a file), and its emulators, for a Firebase sign-in.",
        ".It Ev XDG_CONFIG_HOME , Ev XDG_CACHE_HOME , Ev XDG_RUNTIME_DIR",
        "Where the config file, the copy commands' interrupted uploads and the control sockets are.",
        ".It Ev NOTIFY_SOCKET",
        "systemd's readiness socket, for", ".Cm mount Fl \\-foreground", "under", ".Ql Type=notify .",
        ".El",
        ".Sh FILES",
        ".Bl -tag -width Ds",
        ".It Pa ~/.config/bucketfs/config.json , Pa /etc/bucketfs/config.json",
        "The config file when neither", ".Fl \\-config", "nor", ".Ev BUCKETFS_CONFIG", "names one: the first that exists.",
        ".It Pa ~/.cache/bucketfs/ Ns Ar BUCKET",
        "The default", ".Fl \\-cache\\-dir :", "the block cache, staged writes, and in",
        ".Pa recovery/ Ns Ar BUCKET", "the files whose upload failed.",
        ".It Pa $XDG_RUNTIME_DIR/bucketfs/ , Pa /run/bucketfs/ , Pa /tmp/bucketfs\\- Ns Ar UID Ns Pa /",
        "The mounts' control sockets, which", ".Cm status", "uses.",
        ".It Pa ~/.config/gcloud/application_default_credentials.json",
        "The credentials", ".Ql gcloud auth application\\-default login", "writes.",
        ".It Pa /etc/fuse.conf",
        ".Ql user_allow_other", "there lets users other than root mount with", ".Fl \\-allow\\-other .",
        ".It Pa /sbin/mount.fuse.bucketfs",
        "The helper", ".Xr mount 8", "runs for", ".Ql mount \\-t fuse.bucketfs", "and fstab lines of that type.",
        ".El",
        ".Sh EXIT STATUS",
        ".Bl -tag -width Ds",
        ".It 0", "Success; for", ".Cm mount :", "mounted (in the foreground: unmounted cleanly).",
        ".It 1", "Any other failure.",
        ".It 2", "No such bucket.",
        ".It 3", "Credentials missing or refused, or not allowed to list the bucket.",
        ".It 4", "Endpoint unreachable: storage, or Firebase Auth for a Firebase sign-in.",
        ".It 5",
        "The mount itself failed: the mountpoint is missing, not a directory, busy or dead, or there is no",
        ".Pa /dev/fuse .",
        ".It 64", "Bad command line (usage).",
        ".El",
        ".Sh SEE ALSO",
        ".Xr fusermount3 1 ,",
        ".Xr fstab 5 ,",
        ".Xr fuse 8 ,",
        ".Xr mount 8 ,",
        ".Xr mount.fuse3 8",
        ".Pp",
        "The documentation in the source repository's", ".Pa README.md", "and", ".Pa docs/ .",
    ]
}
