package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/walrelay/walrelay/internal/redact"
)

// adminTimeout bounds one request to the relay's admin API.
const adminTimeout = 10 * time.Second

func pauseCommand() *cobra.Command {
	return pauseResumeCommand("pause", "Pause a running relay: it holds its slot and reads and publishes nothing until resumed",
		"pause asks the relay at --admin-url (else its --metrics-addr) to pause (POST /pause). A paused relay\n"+
			"keeps its replication connection alive; the slot keeps WAL meanwhile. A restart ends the pause\n"+
			"unless the relay runs with --start-paused.")
}

func resumeCommand() *cobra.Command {
	return pauseResumeCommand("resume", "Resume a paused relay: it reads on where it stopped",
		"resume asks the relay at --admin-url (else its --metrics-addr) to resume (POST /resume).")
}

func pauseResumeCommand(verb, short, long string) *cobra.Command {
	s := newSettings()
	var database, reason string
	cmd := &cobra.Command{
		Use:   verb,
		Short: short,
		Long:  long + "\nSend --admin-token (WALRELAY_ADMIN_TOKEN) when the relay has one.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := s.Load(cmd.Flags()); err != nil {
				return err
			}
			s.Warn(cmd.ErrOrStderr(), nil)
			base, _, err := adminURL(s)
			if err != nil {
				return err
			}
			if base == "" {
				return fmt.Errorf("where is the relay? give --admin-url (e.g. http://127.0.0.1:9731) or the relay's --metrics-addr")
			}
			var answer struct {
				Paused  bool   `json:"paused"`
				Changed bool   `json:"changed"`
				Error   string `json:"error"`
			}
			target := base + "/" + verb
			if database != "" {
				target += "?database=" + url.QueryEscape(database)
				base += " (database " + database + ")"
			}
			var body any
			if reason != "" {
				body = map[string]string{"reason": reason}
			}
			if err := adminRequestBody(cmd.Context(), http.MethodPost, target, s.Admin.Token, body, &answer); err != nil {
				return runtimeError{err}
			}
			base = redact.URL(base) // --admin-url may carry a token
			out := cmd.OutOrStdout()
			switch {
			case verb == "pause" && answer.Changed:
				fmt.Fprintf(out, "paused the relay at %s\n", base)
			case verb == "pause":
				fmt.Fprintf(out, "the relay at %s was paused already\n", base)
			case answer.Changed:
				fmt.Fprintf(out, "resumed the relay at %s\n", base)
			default:
				fmt.Fprintf(out, "the relay at %s was running already\n", base)
			}
			return nil
		},
	}
	s.Register(cmd.Flags(), "admin-url", "admin-token", "metrics-addr")
	cmd.Flags().StringVar(&database, "database", "", "the database to "+verb+", of a relay that runs a databases list")
	if verb == "pause" {
		cmd.Flags().StringVar(&reason, "reason", "", "why, said back to whoever looks: GET /pause, /status and the console show it")
	}
	return cmd
}

// adminPost POSTs to the admin API at url with token as the bearer token (when set)
// and decodes the JSON answer into v; an answer other than 200 is an error naming
// what the relay said.
func adminPost(ctx context.Context, url, token string, v any) error {
	return adminRequest(ctx, http.MethodPost, url, token, v)
}

// adminRefusal is an admin API answer other than 200.
type adminRefusal struct {
	url       string
	status    int
	text, msg string // the status line's text, and what the relay said
}

func (e adminRefusal) Error() string {
	return fmt.Sprintf("the relay at %s answered %s: %s", e.url, e.text, e.msg)
}

// adminRequest is adminPost with another method.
func adminRequest(ctx context.Context, method, url, token string, v any) error {
	return adminRequestBody(ctx, method, url, token, nil, v)
}

// adminRequestBody is adminRequest sending body as JSON, when not nil.
func adminRequestBody(ctx context.Context, method, url, token string, body, v any) error {
	ctx, cancel := context.WithTimeout(ctx, adminTimeout)
	defer cancel()
	var payload io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode the request to %s: %w", url, err)
		}
		payload = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, payload)
	if err != nil {
		return fmt.Errorf("admin url %s: %w", url, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("ask the relay (is it running, and is --admin-url right?): %w", err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("read the relay's answer from %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		msg := strings.TrimSpace(string(answer))
		if json.Unmarshal(answer, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		return adminRefusal{url: url, status: resp.StatusCode, text: resp.Status, msg: msg}
	}
	if err := json.Unmarshal(answer, v); err != nil {
		return fmt.Errorf("the relay at %s answered what is not the admin API's JSON (another server there?): %w", url, err)
	}
	return nil
}
