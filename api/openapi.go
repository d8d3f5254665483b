package api

import (
	"bytes"
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
)

// openAPI is the gateway's contract, served at /openapi.yaml. A test keeps
// it and the routes in step; package apitest checks traffic against it.
//
//go:embed openapi.yaml
var openAPI []byte

// OpenAPI returns the gateway's contract, the OpenAPI 3.1 document it
// serves at /openapi.yaml (a copy: callers may keep or change it).
func OpenAPI() []byte { return bytes.Clone(openAPI) }

func serveOpenAPI(c echo.Context) error {
	return c.Blob(http.StatusOK, "application/yaml", openAPI)
}
