package deps
import (
 _ "github.com/aws/aws-lambda-go/events"
 _ "github.com/aws/aws-lambda-go/lambda"
 _ "github.com/aws/aws-sdk-go-v2/service/dynamodb"
 _ "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
 _ "github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
 _ "github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
 _ "github.com/aws/aws-sdk-go-v2/config"
 _ "github.com/aws/aws-sdk-go-v2/credentials"
 _ "gopkg.in/yaml.v3"
 _ "github.com/santhosh-tekuri/jsonschema/v6"
)
