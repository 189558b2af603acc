{{/*
talon.manager renders one provider's manager Deployment, as config/<provider>/manager and
(for the infrastructure provider) config/infrastructure/docker and
config/infrastructure/boot-service make it. Its argument is a
dict: root (the chart's context), provider (its name in object names: bootstrap,
control-plane, infrastructure), image (its name in image names) and values (its values).
*/}}
{{- define "talon.manager" -}}
{{- $root := .root -}}
{{- $v := .values -}}
{{- $name := printf "talon-%s" .provider -}}
{{- $docker := and (eq .provider "infrastructure") $v.docker.enabled -}}
{{- $boot := and (eq .provider "infrastructure") $v.bootService.enabled -}}
{{- $asRoot := or $docker $boot -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  labels:
    cluster.x-k8s.io/provider: {{ .provider }}-talon
    control-plane: {{ $name }}-controller-manager
  name: {{ $name }}-controller-manager
  namespace: {{ $name }}-system
spec:
  replicas: {{ $v.replicas }}
  {{- if $boot }}
  strategy:
    type: Recreate
  {{- end }}
  selector:
    matchLabels:
      control-plane: {{ $name }}-controller-manager
  template:
    metadata:
      labels:
        control-plane: {{ $name }}-controller-manager
    spec:
      containers:
      - args:
        - --leader-elect
        - --diagnostics-address={{ $root.Values.diagnostics.address }}
        - --insecure-diagnostics={{ $root.Values.diagnostics.insecure }}
        - --feature-gates={{ $root.Values.featureGates }}
        - --v={{ $root.Values.logLevel }}
        {{- if eq .provider "bootstrap" }}
        - --image-factory-url={{ $v.imageFactoryURL }}
        {{- end }}
        {{- if eq .provider "control-plane" }}
        - --kubernetes-cluster-class={{ $v.kubernetesClusterClass }}
        {{- end }}
        {{- if eq .provider "infrastructure" }}
        - --runtime={{ $v.docker.runtime }}
        - --docker-unprivileged-nodes={{ $v.docker.unprivilegedNodes }}
        {{- end }}
        {{- if $boot }}
        {{- with $v.bootService }}
        - --boot-service
        - --boot-server-ip={{ required "infrastructure.bootService.serverIP: the boot service needs this node's IPv4 address on the provisioning network" .serverIP }}
        - --boot-interface={{ required "infrastructure.bootService.interface: the boot service needs the provisioning network's interface" .interface }}
        - --boot-http-address={{ .httpAddress }}
        - --dhcp-mode={{ .dhcp.mode }}
        - --dhcp-pool-start={{ .dhcp.poolStart }}
        - --dhcp-pool-end={{ .dhcp.poolEnd }}
        - --dhcp-netmask={{ .dhcp.netmask }}
        - --dhcp-router={{ .dhcp.router }}
        - --tftp-dir=/srv/tftp
        - --boot-asset-dir=/var/lib/talon/boot-assets
        {{- end }}
        {{- end }}
        {{- range $v.extraArgs }}
        - {{ . | quote }}
        {{- end }}
        command:
        - /manager
        image: {{ $v.image.repository | default (printf "%s/talon-%s-manager" $root.Values.image.registry .image) }}:{{ $v.image.tag | default $root.Values.image.tag }}
        imagePullPolicy: {{ $root.Values.image.pullPolicy }}
        livenessProbe:
          httpGet:
            path: /healthz
            port: healthz
          timeoutSeconds: 5
        name: manager
        ports:
        - containerPort: 9443
          name: webhook-server
          protocol: TCP
        {{- if eq .provider "control-plane" }}
        - containerPort: 9444
          name: runtime-ext
          protocol: TCP
        {{- end }}
        - containerPort: 9440
          name: healthz
          protocol: TCP
        - containerPort: 8443
          name: metrics
          protocol: TCP
        readinessProbe:
          httpGet:
            path: /readyz
            port: healthz
          timeoutSeconds: 5
        {{- with $v.resources }}
        resources:
          {{- toYaml . | nindent 10 }}
        {{- end }}
        securityContext:
          allowPrivilegeEscalation: false
          capabilities:
            {{- if $boot }}
            add:
            - NET_BIND_SERVICE
            - NET_RAW
            {{- end }}
            drop:
            - ALL
          readOnlyRootFilesystem: true
          runAsGroup: {{ ternary 0 65532 $asRoot }}
          runAsUser: {{ ternary 0 65532 $asRoot }}
        volumeMounts:
        - mountPath: /tmp/k8s-webhook-server/serving-certs
          name: webhook-cert
          readOnly: true
        {{- if $docker }}
        - mountPath: /var/run/docker.sock
          name: docker-socket
        {{- end }}
        {{- if $boot }}
        - mountPath: /srv/tftp
          name: tftp
          readOnly: true
        - mountPath: /var/lib/talon/boot-assets
          name: boot-assets
        {{- end }}
      {{- if $boot }}
      dnsPolicy: ClusterFirstWithHostNet
      hostNetwork: true
      {{- end }}
      {{- with $root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $root.Values.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with $root.Values.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        runAsNonRoot: {{ not $asRoot }}
        seccompProfile:
          type: RuntimeDefault
      serviceAccountName: {{ $name }}-manager
      terminationGracePeriodSeconds: 10
      {{- with $root.Values.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      volumes:
      - name: webhook-cert
        secret:
          secretName: {{ $name }}-webhook-service-cert
      {{- if $docker }}
      - hostPath:
          path: {{ $v.docker.socket }}
          type: Socket
        name: docker-socket
      {{- end }}
      {{- if $boot }}
      - hostPath:
          path: {{ $v.bootService.tftpDir }}
          type: Directory
        name: tftp
      - hostPath:
          path: {{ $v.bootService.assetDir }}
          type: DirectoryOrCreate
        name: boot-assets
      {{- end }}
{{- end }}
