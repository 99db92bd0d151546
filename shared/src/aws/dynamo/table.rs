//! The table itself, created as template.yaml declares it (for local stacks and tests).

use super::*;

/// Creates the table as template.yaml declares it (for local stacks and tests).
pub async fn create_table(client: &Client, table: &str) -> Result<(), StoreError> {
    use aws_sdk_dynamodb::types::{
        AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection, ProjectionType,
        ScalarAttributeType,
    };
    let attr = |name: &str| {
        AttributeDefinition::builder().attribute_name(name).attribute_type(ScalarAttributeType::S).build().expect("set")
    };
    let k = |name: &str, t: KeyType| KeySchemaElement::builder().attribute_name(name).key_type(t).build().expect("set");
    client
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(attr("pk"))
        .attribute_definitions(attr("sk"))
        .attribute_definitions(attr("gsi1pk"))
        .attribute_definitions(attr("gsi1sk"))
        .attribute_definitions(attr("gsi2pk"))
        .attribute_definitions(attr("gsi2sk"))
        .key_schema(k("pk", KeyType::Hash))
        .key_schema(k("sk", KeyType::Range))
        .global_secondary_indexes(
            GlobalSecondaryIndex::builder()
                .index_name(GSI)
                .key_schema(k("gsi1pk", KeyType::Hash))
                .key_schema(k("gsi1sk", KeyType::Range))
                .projection(Projection::builder().projection_type(ProjectionType::All).build())
                .build()
                .expect("set"),
        )
        // People's requests only (`requests.rs`): their writers may not touch gsi1.
        .global_secondary_indexes(
            GlobalSecondaryIndex::builder()
                .index_name(super::requests::REQUEST_INDEX)
                .key_schema(k("gsi2pk", KeyType::Hash))
                .key_schema(k("gsi2sk", KeyType::Range))
                .projection(Projection::builder().projection_type(ProjectionType::All).build())
                .build()
                .expect("set"),
        )
        .send()
        .await
        .map_err(|e| store_err("create table", e))?;
    Ok(())
}
