/*
Copyright 2026 The Talon Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package version

import (
	"fmt"
	"runtime"
)

// Set at link time by the Makefile (-X github.com/talon-capi/talon/internal/version.gitVersion=...).
var (
	gitVersion = "dev"
	gitCommit  = "unknown"
	buildDate  = "unknown"
)

// Info describes one build of a Talon binary.
type Info struct {
	// GitVersion is the release tag, or "dev".
	GitVersion string `json:"gitVersion"`
	// GitCommit is the commit the binary was built from.
	GitCommit string `json:"gitCommit"`
	// BuildDate is when the binary was built, in RFC 3339.
	BuildDate string `json:"buildDate"`
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string `json:"goVersion"`
	// Platform is the operating system and architecture.
	Platform string `json:"platform"`
}

// Get returns the build information of the running binary.
func Get() Info {
	return Info{
		GitVersion: gitVersion,
		GitCommit:  gitCommit,
		BuildDate:  buildDate,
		GoVersion:  runtime.Version(),
		Platform:   runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// String renders the build information on one line.
func (i Info) String() string {
	return fmt.Sprintf("%s (commit %s, built %s, %s, %s)", i.GitVersion, i.GitCommit, i.BuildDate, i.GoVersion, i.Platform)
}
