import Foundation
@testable import SealedPushGateway
import SealedPushCrypto
import SealedPushTestSupport
import SealedPushWire
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// #44 pilot 1 and F: every secret file goes through one check (gateway v1 §1) — refused when any user may read or
/// write it, or when another user owns it and the gateway could write it; group access warns; a file another user
/// owns that the gateway can read and not write is accepted; a symbolic link (a Kubernetes secret) is followed, and
/// the file checked is the file read.
@Suite("Gateway secret files: one check", .timeLimit(.minutes(2)))
struct GatewaySecretFileTests {
    let directory: URL

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("secret-files-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    func file(_ name: String, mode: Int, contents: String = "secret") throws -> String {
        let path = directory.appendingPathComponent(name).path
        try Data(contents.utf8).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
        return path
    }

    func read(_ path: String) -> Result<String?, GatewayConfigurationError> {
        do { return .success(try GatewaySecretFile.read(path, member: "/apps/chat/webpush/vapid_key", what: "the VAPID key").warning) } catch {
            return .failure(error)
        }
    }

    @Test func modesFollowTheSpec() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect(read(try file("own-600", mode: 0o600)) == .success(nil))
        #expect(read(try file("own-400", mode: 0o400)) == .success(nil))
        // Group-readable (a Kubernetes or systemd-credentials mount) warns, never refuses: 0640 and 0440.
        for mode in [0o640, 0o440] {
            guard case let .success(warning?) = read(try file("group-\(String(mode, radix: 8))", mode: mode)) else {
                Issue.record("mode \(String(mode, radix: 8)) must be accepted with a warning")
                continue
            }
            #expect(warning.hasPrefix("/apps/chat/webpush/vapid_key: ") && warning.contains("can be read by its group (mode \(String(mode, radix: 8)))"), "\(warning)")
        }
        // Any access for other users is refused, with the fix that works.
        for mode in [0o644, 0o604, 0o602, 0o666] {
            guard case let .failure(error) = read(try file("other-\(String(mode, radix: 8))", mode: mode)) else {
                Issue.record("mode \(String(mode, radix: 8)) must be refused")
                continue
            }
            #expect(error.member == "/apps/chat/webpush/vapid_key")
            #expect(error.problem.contains("can be read or written by any user (mode \(String(mode, radix: 8)))") && error.problem.contains("chmod 600"), "\(error)")
        }
        guard case let .failure(missing) = read(directory.appendingPathComponent("absent").path) else { Issue.record("a missing file"); return }
        #expect(missing.problem.contains("does not exist"), "\(missing)")
        guard case let .failure(folder) = read(directory.path) else { Issue.record("a directory"); return }
        #expect(folder.problem.contains("is a directory"), "\(folder)")
    }

    /// A Kubernetes secret is a symbolic link into a timestamped directory: it is followed, and the file it names is
    /// checked (a link to an open file is still refused).
    @Test func aSymlinkedSecretWorks() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let target = try file("..data-vapid.p8", mode: 0o600, contents: "the key")
        let link = directory.appendingPathComponent("vapid.p8").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
        #expect(read(link) == .success(nil))
        let read = try GatewaySecretFile.read(link, member: "/m", what: "x")
        #expect(read.bytes.unsafeCopyToArray() == Array("the key".utf8))
        let open = try file("open.p8", mode: 0o644)
        let openLink = directory.appendingPathComponent("open-link.p8").path
        try FileManager.default.createSymbolicLink(atPath: openLink, withDestinationPath: open)
        guard case .failure = self.read(openLink) else { Issue.record("a link to an open file must be refused"); return }
    }

    /// A read-only secret owned by another user: accepted when the gateway can read it and not write it; refused
    /// when the gateway's group could write it. Needs root to give a file away (skipped otherwise).
    @Test func anotherUsersFileIsAcceptedWhenNotWritableByUs() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        guard geteuid() == 0 else { return }
        let readOnly = try file("mounted-440", mode: 0o440)
        #expect(chown(readOnly, 65534, getegid()) == 0)
        guard case .success(_?) = read(readOnly) else { Issue.record("another user's 0440 file readable through our group"); return }
        let writable = try file("mounted-660", mode: 0o660)
        #expect(chown(writable, 65534, getegid()) == 0)
        guard case let .failure(error) = read(writable) else { Issue.record("another user's file our group can write"); return }
        #expect(error.problem.contains("belongs to another user") && error.problem.contains("chmod 640"), "\(error)")
    }

    /// Through the configuration: the one check, the app named by its id in the pointer.
    @Test func theConfigurationNamesTheAppAndWarns() throws {
        let parsed = try GatewayHarness.parseTestDirectory("secret-config")
        defer { try? FileManager.default.removeItem(at: parsed) }
        let key = parsed.appendingPathComponent("key.p8").path
        try FileManager.default.setAttributes([.posixPermissions: 0o640], ofItemAtPath: key)
        let configuration = try GatewayConfiguration.parse(Array(configurationText("").utf8), baseDirectory: parsed.path)
        #expect(configuration.warnings.contains { $0.hasPrefix("/apps/chat/apns/auth_key: ") && $0.contains("group") }, "\(configuration.warnings)")
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: key)
        do {
            _ = try GatewayConfiguration.parse(Array(configurationText("").utf8), baseDirectory: parsed.path)
            Issue.record("a key any user can read was accepted")
        } catch {
            #expect(error.member == "/apps/chat/apns/auth_key" && error.problem.contains("chmod 600"), "\(error)")
            #expect(!error.problem.contains("or 640 for a group-mounted secret); run"), "no advice the next check refuses")
        }
    }
}
