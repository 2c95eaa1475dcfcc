package auditexport

// Severity is the severity of the message of line, for severity_test.go:
// that test imports the gateway, which imports this package.
func Severity(line []byte) int {
	_, h, _ := fields(nil, line)
	return h.severity()
}

// SeverityWarning and SeverityInfo are the severities Severity returns.
const SeverityWarning, SeverityInfo = severityWarning, severityInfo
