package api

import (
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
)

// openAPI is the gateway's contract, served at /openapi.yaml. A test keeps
// it and the routes in step.
//
//go:embed openapi.yaml
var openAPI []byte

func serveOpenAPI(c echo.Context) error {
	return c.Blob(http.StatusOK, "application/yaml", openAPI)
}
