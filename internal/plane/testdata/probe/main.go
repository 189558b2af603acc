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

// Command probe is the workload of TestPlaneWithNode. "probe serve ADDR" answers every
// request with "probe"; "probe" alone, in a Pod, reports on standard output what the Pod
// can do: list the ConfigMaps of its namespace with its service account's token through
// the kubernetes Service, list Secrets (its Role does not allow it), and GET $PROBE_URL
// (a container on another Docker network); then it waits to be stopped.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

const serviceAccount = "/var/run/secrets/kubernetes.io/serviceaccount/"

func main() {
	if len(os.Args) == 3 && os.Args[1] == "serve" {
		handler := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "probe") })
		server := &http.Server{Addr: os.Args[2], Handler: handler, ReadHeaderTimeout: 5 * time.Second}
		fmt.Println(server.ListenAndServe())
		os.Exit(1)
	}
	token, err := os.ReadFile(serviceAccount + "token")
	check("token", err)
	namespace, err := os.ReadFile(serviceAccount + "namespace")
	check("namespace", err)
	ca, err := os.ReadFile(serviceAccount + "ca.crt")
	check("ca.crt", err)
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	api := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	server := "https://" + net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT"))
	for _, resource := range []string{"configmaps", "secrets"} {
		req, err := http.NewRequest(http.MethodGet, server+"/api/v1/namespaces/"+string(namespace)+"/"+resource, http.NoBody)
		check("request", err)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
		fmt.Printf("list %s via %s: %s\n", resource, server, get(api, req))
	}
	req, err := http.NewRequest(http.MethodGet, os.Getenv("PROBE_URL"), http.NoBody)
	check("request", err)
	fmt.Printf("get %s: %s\n", os.Getenv("PROBE_URL"), get(&http.Client{Timeout: 10 * time.Second}, req))
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}

// get describes the answer to req in one line: the status and the names of the items of
// a list, or the start of any other body.
func get(c *http.Client, req *http.Request) string {
	resp, err := c.Do(req)
	if err != nil {
		return "error: " + err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var list struct {
		Items []struct {
			Metadata struct{ Name string } `json:"metadata"`
		} `json:"items"`
	}
	if resp.StatusCode == http.StatusOK && json.Unmarshal(body, &list) == nil {
		var names []string
		for _, item := range list.Items {
			names = append(names, item.Metadata.Name)
		}
		return resp.Status + " items " + strings.Join(names, " ")
	}
	return resp.Status + " " + strings.Join(strings.Fields(string(body[:min(len(body), 300)])), " ")
}

func check(what string, err error) {
	if err != nil {
		fmt.Println(what+":", err)
		os.Exit(1)
	}
}
