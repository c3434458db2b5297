module github.com/infermatrix/infermatrix

go 1.26

require (
	github.com/dlclark/regexp2 v1.11.0
	github.com/expr-lang/expr v1.17.8
	github.com/pkoukk/tiktoken-go v0.1.8
	github.com/pkoukk/tiktoken-go-loader v0.0.2
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.2
	github.com/sashabaranov/go-openai v1.43.0
	github.com/spf13/cobra v1.10.2
	golang.org/x/text v0.38.0
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/google/uuid v1.3.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	github.com/stretchr/testify v1.11.1 // indirect
)
