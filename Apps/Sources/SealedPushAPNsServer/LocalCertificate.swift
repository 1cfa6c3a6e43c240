import Crypto
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import SwiftASN1
import X509

/// The TLS identity of a local APNs (or the local Web Push service): a CA made at start and a server certificate for `localhost`,
/// `127.0.0.1` and `::1` signed by it. Clients trust the CA (`ca.pem`, the CLI's `--ca-cert`).
public struct LocalCertificateAuthority: Sendable {
    /// The CA certificate, PEM: what clients trust.
    public let caPEM: String
    /// The server certificate, PEM.
    public let serverCertificatePEM: String
    /// The server certificate's private key, PEM (kept in memory; never written out).
    package let serverKeyPEM: String

    /// Makes a fresh CA and server certificate, valid from an hour ago for `days` days; `caName` is the CA's common
    /// name (the local Web Push service names itself).
    public static func make(days: Int = 30, now: Date = Date(), caName: String = "SealedPush local APNs CA") throws -> LocalCertificateAuthority {
        let caKey = P256.Signing.PrivateKey()
        let serverKey = P256.Signing.PrivateKey()
        let caName = try DistinguishedName {
            OrganizationName("SealedPush")
            CommonName(caName)
        }
        let serverName = try DistinguishedName {
            OrganizationName("SealedPush")
            CommonName("localhost")
        }
        let notBefore = now.addingTimeInterval(-3600)
        let notAfter = now.addingTimeInterval(Double(days) * 86_400)
        let ca = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: .init(caKey.publicKey),
            notValidBefore: notBefore, notValidAfter: notAfter, issuer: caName, subject: caName,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true))
            },
            issuerPrivateKey: .init(caKey))
        let server = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: .init(serverKey.publicKey),
            notValidBefore: notBefore, notValidAfter: notAfter, issuer: caName, subject: serverName,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames([
                    .dnsName("localhost"),
                    .ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 1])),
                    .ipAddress(ASN1OctetString(contentBytes: ArraySlice([UInt8](repeating: 0, count: 15) + [1]))),
                ])
            },
            issuerPrivateKey: .init(caKey))
        return LocalCertificateAuthority(
            caPEM: try ca.serializeAsPEM().pemString, serverCertificatePEM: try server.serializeAsPEM().pemString,
            serverKeyPEM: serverKey.pemRepresentation)
    }
}
