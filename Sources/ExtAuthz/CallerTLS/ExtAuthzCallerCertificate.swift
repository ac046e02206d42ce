import X509

/// The certificate a gRPC caller presented (verified against the client CA by the handshake):
/// the event `ExtAuthzCallerCertificateGate` sends up the pipeline once the handshake completes,
/// for each check on the connection to be admitted or denied by.
struct ExtAuthzCallerCertificate {
    let certificate: Certificate?
}
