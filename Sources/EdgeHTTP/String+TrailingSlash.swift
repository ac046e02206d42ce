extension String {
    /// The string without any trailing `/`.
    package var trimmingTrailingSlash: String {
        var text = Substring(self)
        while text.hasSuffix("/") { text = text.dropLast() }
        return String(text)
    }
}
