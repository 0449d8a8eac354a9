# Static certwatch binary on a distroless, non-root base that carries CA
# certificates. Build: docker build -t certwatch .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/certwatch ./cmd/certwatch

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/certwatch /usr/local/bin/certwatch
USER nonroot:nonroot
# State (SQLite) lives on a volume; config is mounted read-only.
VOLUME ["/var/lib/certwatch"]
WORKDIR /var/lib/certwatch
ENTRYPOINT ["/usr/local/bin/certwatch"]
CMD ["--help"]
