# The infermatrix image: the static linux binary and nothing else a base
# image would bring. It is built FROM scratch, so no base image is pulled
# and the build needs no registry; `make image-context` prepares every file
# it holds in dist/image (this Dockerfile is copied there too), and
# `make image` builds it:
#
#   make image                        # docker build -t infermatrix:$(VERSION) dist/image
#   make image CONTAINER_TOOL=podman  # or buildah; IMAGE_ARCH=arm64 for arm64
#
# There is no RUN step: a scratch image has no shell to run one in, and
# nothing is downloaded at build time. See docs/release.md.
FROM scratch

# /etc/passwd and /etc/group name the non-root user (uid and gid 65532,
# home /work); the CA bundle is the build host's, so HTTPS targets verify;
# /tmp is mode 1777 for temporary files (the workbook's stream writer
# spills there), whatever uid the container runs as.
COPY rootfs/ /

# /work, owned by the user, is where runs are written (runs/<name>/...).
# COPY --chown of the folder that holds work/ is what gives work/ its
# owner: a scratch image has no chown to RUN.
COPY --chown=65532:65532 home/ /

COPY infermatrix /infermatrix

# Numeric, so that Kubernetes' runAsNonRoot can verify it without reading
# /etc/passwd.
USER 65532:65532
WORKDIR /work
ENV HOME=/work TMPDIR=/tmp
ENTRYPOINT ["/infermatrix"]
CMD ["--help"]
