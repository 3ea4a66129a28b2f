package ops

// statusCodes are the exit codes of `walrelay status`, per check. When several
// problems are found the code is that of the first check in statusOrder.
var statusCodes = map[Check]int{
	CheckSlot:          1,
	CheckPublication:   1,
	CheckDeadLetters:   1,
	CheckDatabase:      3,
	CheckNotStreamed:   4,
	CheckPending:       5,
	CheckRelayNotReady: 6,
}

// statusOrder ranks the checks for the exit code, most telling first: the relay's
// own word, then no relay at all, then rows that wait, then the rest.
var statusOrder = []Check{CheckDatabase, CheckRelayNotReady, CheckNotStreamed, CheckPending,
	CheckSlot, CheckPublication, CheckDeadLetters}

// StatusExitCode is the exit code of `walrelay status` for problems: 0 for none,
// else that of the most telling check (docs/configuration.md lists them).
func StatusExitCode(problems []Problem) int {
	for _, check := range statusOrder {
		for _, p := range problems {
			if p.Check == check {
				return statusCodes[check]
			}
		}
	}
	if len(problems) > 0 {
		return 1
	}
	return 0
}

// StatusReport is what `walrelay status --json` prints and GET /status answers:
// the status, its verdict and the exit code.
type StatusReport struct {
	*Status
	OK       bool `json:"ok"`
	ExitCode int  `json:"exit_code"`
}

// NewStatusReport gives st its verdict.
func NewStatusReport(st *Status) StatusReport {
	code := StatusExitCode(st.Problems)
	return StatusReport{Status: st, OK: code == 0, ExitCode: code}
}
