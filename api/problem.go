package api

import "octflow/api/problems"

// Problem is an RFC 9457 problem detail, the body of every refusal and
// failure the gateway answers (see package problems).
type Problem = problems.Problem

// problem builds a Problem of a kind, e.g. problem(http.StatusConflict, "exam-conflict", "…").
func problem(status int, kind, detail string) *Problem { return problems.New(status, kind, detail) }

// jsonProblem is the 400 for a JSON body (what names it) that did not
// decode (problems.JSON).
func jsonProblem(what string, err error) *Problem { return problems.JSON(what, err) }
