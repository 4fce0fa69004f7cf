import ArgumentParser
import Foundation
import Logging
import StorageKit
import Transport

/// Where the bucket lives and how to authenticate: shared by every command.
///
/// OAuth credentials (or none) speak the Cloud Storage JSON API; a
/// Firebase Auth sign-in speaks the Firebase Storage REST API (v0) as that
/// user, where the bucket's Security Rules decide.
struct StorageOptions: ParsableArguments {
    @Option(Settings.endpoint) var endpoint: String?
    @Option(Settings.keyFile) var keyFile: String?
    @Option(Settings.impersonateServiceAccount) var impersonateServiceAccount: String?
    @Option(Settings.iamEndpoint) var iamEndpoint: String?
    @Option(Settings.billingProject) var billingProject: String?
    @Option(Settings.tokenFile) var tokenFile: String?
    @Flag(Settings.anonymous) var anonymous: Bool = false
    @Option(Settings.firebaseAPIKey) var firebaseAPIKey: String?
    @Option(Settings.firebaseEmail) var firebaseEmail: String?
    @Option(Settings.firebasePasswordFile) var firebasePasswordFile: String?
    @Option(Settings.firebaseRefreshTokenFile) var firebaseRefreshTokenFile: String?
    @Option(Settings.firebaseCustomTokenFile) var firebaseCustomTokenFile: String?
    @Flag(Settings.firebaseAnonymous) var firebaseAnonymous: Bool = false
    @Option(Settings.firebaseAuthEmulator) var firebaseAuthEmulator: String?

    /// These options with what the mount's other sources (-o, BUCKETFS_*
    /// variables, the config file) add, checked like the command line's.
    func resolved(_ settings: SettingsResolver) throws -> StorageOptions {
        var options = self
        try Settings.resolve(&options, settings)
        do {
            try options.validate()
        } catch let error as ValidationError {
            throw CLIError.usage(error.message)
        }
        return options
    }

    /// How many Firebase sign-ins were asked for.
    private var firebaseMethods: Int {
        [firebaseEmail != nil, firebaseRefreshTokenFile != nil, firebaseCustomTokenFile != nil, firebaseAnonymous].filter { $0 }.count
    }

    func validate() throws {
        if let endpoint, Self.endpointURL(endpoint) == nil {
            throw ValidationError("--endpoint \(endpoint) is not a URL: give http(s)://HOST[:PORT] (e.g. http://127.0.0.1:9023) or HOST:PORT")
        }
        let firebase = firebaseMethods > 0
        if [keyFile != nil, tokenFile != nil, anonymous, firebase].filter({ $0 }).count > 1 {
            throw ValidationError("choose one of --key-file, --token-file, --anonymous and a Firebase sign-in")
        }
        if impersonateServiceAccount != nil && (anonymous || firebase) {
            throw ValidationError("--impersonate-service-account needs Google credentials, not --anonymous or a Firebase sign-in")
        }
        if iamEndpoint != nil && impersonateServiceAccount == nil {
            throw ValidationError("--iam-endpoint goes with --impersonate-service-account")
        }
        if billingProject != nil && firebase {
            throw ValidationError("--billing-project is for the Cloud Storage JSON API, not a Firebase sign-in")
        }
        if firebaseMethods > 1 {
            throw ValidationError("choose one Firebase sign-in: --firebase-email, --firebase-refresh-token-file, --firebase-custom-token-file or --firebase-anonymous")
        }
        if (firebaseEmail == nil) != (firebasePasswordFile == nil) {
            throw ValidationError("--firebase-email and --firebase-password-file go together")
        }
        if !firebase && (firebaseAPIKey != nil || firebaseAuthEmulator != nil) {
            throw ValidationError("--firebase-api-key and --firebase-auth-emulator need a Firebase sign-in (e.g. --firebase-email)")
        }
    }

    func configuration(transport: HTTPTransport = .shared) throws -> StorageConfiguration {
        var configuration = StorageConfiguration.fromEnvironment()
        configuration.transport = transport
        let environment = ProcessInfo.processInfo.environment
        if let endpoint {
            guard let url = Self.endpointURL(endpoint) else {
                throw CLIError.usage("--endpoint \(endpoint) is not a URL")
            }
            configuration.endpoint = url
        }
        do {
            if let signIn = try firebaseSignIn() {
                var auth = try FirebaseAuth.fromEnvironment(apiKey: firebaseAPIKey, environment: environment, transport: transport)
                if let host = firebaseAuthEmulator {
                    guard let url = StorageConfiguration.emulatorURL(host), let name = url.host, let port = url.port else {
                        throw CLIError.usage("--firebase-auth-emulator \(host) is not host:port")
                    }
                    auth.useEmulator(withHost: name, port: port)
                }
                configuration.credentials = FirebaseAuthCredentials(auth: auth, signIn: signIn, logger: Logger(label: "bucketfs.credentials"))
            } else if let google = try googleCredentials(environment: environment, transport: transport) {
                configuration.credentials = google
            }
        } catch let error as CredentialsError {
            let hint = credentialsHint(endpoint: configuration.endpoint, environment: environment).map { "; \($0)" } ?? ""
            throw CLIError.bucket("credentials: \(error)\(hint)", exitCode: 3)
        }
        configuration.billingProject = billingProject
        return configuration
    }

    /// Whether the Application Default Credentials are looked up: no other
    /// credentials are given, and no emulator is named by
    /// `STORAGE_EMULATOR_HOST` (which, as in Google's client libraries,
    /// means anonymous unless impersonation asks for credentials). An
    /// `--endpoint` keeps them: a regional endpoint, Private Service
    /// Connect or a proxy needs the same credentials as the default one.
    func usesApplicationDefaultCredentials(environment: [String: String]) -> Bool {
        guard !anonymous, keyFile == nil, tokenFile == nil, firebaseMethods == 0 else { return false }
        return impersonateServiceAccount != nil || (environment["STORAGE_EMULATOR_HOST"] ?? "").isEmpty
    }

    /// What to add to a "credentials missing or refused" message: with
    /// the Application Default Credentials in front of a plain-http
    /// endpoint on this machine (most likely an emulator), how to go
    /// without credentials. Nil otherwise.
    func credentialsHint(endpoint: URL, environment: [String: String]) -> String? {
        guard usesApplicationDefaultCredentials(environment: environment), Self.isLocalHTTP(endpoint) else { return nil }
        return "\(endpoint.absoluteString) is a local endpoint: for an emulator, add --anonymous"
    }

    /// An http:// URL on a loopback address.
    static func isLocalHTTP(_ url: URL) -> Bool {
        guard url.scheme?.lowercased() == "http", let host = url.host?.lowercased() else { return false }
        let bare = host.trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        return bare == "localhost" || bare == "::1" || bare.hasPrefix("127.")
    }

    /// `--endpoint`'s value as a base URL: `http(s)://HOST[:PORT][/PATH]`,
    /// or `HOST:PORT` as STORAGE_EMULATOR_HOST is written. Anything else is
    /// refused at once: a bare word would be looked up as a host name and
    /// retried until the mount's patience ran out.
    static func endpointURL(_ text: String) -> URL? {
        guard let url = StorageConfiguration.emulatorURL(text), ["http", "https"].contains(url.scheme?.lowercased() ?? ""),
              let host = url.host, !host.isEmpty, text.contains("://") || url.port != nil
        else { return nil }
        return url
    }

    /// OAuth credentials: the key or token file given, else (unless
    /// anonymous, or an emulator is named without impersonation) the
    /// Application Default Credentials; wrapped for impersonation when asked.
    private func googleCredentials(
        environment: [String: String], transport: HTTPTransport
    ) throws(CredentialsError) -> (any CredentialsProvider)? {
        let base: (any CredentialsProvider)?
        if let keyFile {
            base = try CredentialsFile.load(keyFile, transport: transport)
        } else if let tokenFile {
            base = StaticTokenCredentials(tokenFile: tokenFile)
        } else if usesApplicationDefaultCredentials(environment: environment) {
            base = try Credentials.fromEnvironment(environment, transport: transport)
        } else {
            base = nil
        }
        guard let base, let email = impersonateServiceAccount else { return base }
        return ImpersonatedCredentials(
            serviceAccount: email, source: base, endpoint: iamEndpoint ?? ImpersonatedCredentials.iamCredentialsEndpoint,
            transport: transport)
    }

    /// The Firebase sign-in asked for, its secrets read from their files
    /// (errors name the file, never its content).
    private func firebaseSignIn() throws(CredentialsError) -> FirebaseAuthCredentials.SignIn? {
        if let firebaseEmail, let firebasePasswordFile {
            return .emailPassword(email: firebaseEmail, password: try Self.secret(firebasePasswordFile, "password"))
        }
        if let firebaseRefreshTokenFile { return .refreshToken(try Self.secret(firebaseRefreshTokenFile, "refresh token")) }
        if let firebaseCustomTokenFile { return .customToken(try Self.secret(firebaseCustomTokenFile, "custom token")) }
        return firebaseAnonymous ? .anonymous : nil
    }

    private static func secret(_ path: String, _ what: String) throws(CredentialsError) -> String {
        try FirebaseAuthCredentials.readSecret(fromFile: path, what: what)
    }
}
